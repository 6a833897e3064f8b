"""The HTTP API tried as an attacker would, against a real ``remindkit api`` process:
a page on a foreign name that resolves to 127.0.0.1 (real Chromium with a
host-resolver rule), a page of another origin on this host, another Unix user,
a flood of unfinished request heads, huge bodies, a PATCH that fails half-way,
one token taking every event stream, a revoked token's open stream. Each is in
the attack table of docs/operations/security.md."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from remindkit.settings import Settings
from remindkit.store import open_store
from tests.conftest import second_user_or_skip

from .conftest import cli, wait_for

pytestmark = [pytest.mark.api, pytest.mark.processes]

CHROMIUM = os.environ.get("REMINDKIT_TEST_CHROMIUM", "/usr/bin/chromium")
BASE = "/v1/projects/default/sessions"


def _store(url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    return open_store(url, settings=Settings.from_env(env={}, home=tmp_path / "reader"))


ATTACK_PAGE = """<!doctype html><meta charset=utf-8><title>cat pictures</title><script>
window.results = (async () => {
  const out = {};
  const grab = async (name, path, init) => {
    try { const r = await fetch(path, init); out[name] = [r.status, await r.text()]; }
    catch (e) { out[name] = ["error", String(e)]; }
  };
  await grab("sessions", "/v1/projects/default/sessions");
  await grab("view", "/v1/projects/default/sessions/victim/view");
  await grab("reminders", "/v1/projects/default/sessions/victim/reminders");
  await grab("create", "/v1/projects/default/sessions/victim/reminders",
    {method: "POST", headers: {"content-type": "application/json"},
     body: JSON.stringify({prompt: "planted", in: "1m", alarm: true, announce: "hi"})});
  await grab("delete", "/v1/projects/default/sessions/victim/reminders/" + window.VICTIM, {method: "DELETE"});
  await grab("page", "/");
  out.stream = await new Promise((resolve) => {
    const s = new EventSource("/v1/events");
    const t = setTimeout(() => { s.close(); resolve("no event"); }, 5000);
    s.onmessage = s.onopen = () => { clearTimeout(t); s.close(); resolve("open"); };
    s.onerror = () => { clearTimeout(t); s.close(); resolve("refused"); };
  });
  return out;
})();
</script>"""


def _chromium(pw, *rules: str):  # type: ignore[no-untyped-def]
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/setup --test installs chromium")
    # Chromium's own Local Network Access checks are off: the attack is on the server,
    # as other browsers (and older Chromium) would let the page through
    args = [
        "--no-sandbox",
        "--headless=new",
        "--disable-gpu",
        "--no-first-run",
        "--disable-features=LocalNetworkAccessChecks,PrivateNetworkAccessRespectPreflightResults,"
        "BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights",
    ]
    if rules:
        args.append("--host-resolver-rules=" + ",".join(rules))
    return pw.chromium.launch(executable_path=CHROMIUM, args=args)


def test_a_name_given_with_allow_host_is_answered_and_no_other(api_server, sqlite_url):
    """``--allow-host rk.home.arpa`` (a name in front of the server, e.g. a proxy's): a
    request that names it is served as any other; a request naming another name is
    refused before anything is read or changed, on the REST routes, the page and /mcp."""
    srv = api_server(sqlite_url, args=("--allow-host", "rk.home.arpa"))
    port = srv.base_url.rsplit(":", 1)[1]
    path = f"{BASE}/proxied/reminders"
    with httpx.Client(base_url=srv.base_url, headers=srv.headers, timeout=30) as http:
        named = {"Host": f"rk.home.arpa:{port}"}
        made = http.post(path, json={"prompt": "through the proxy", "in": "1h"}, headers=named)
        assert made.status_code == 201, made.text
        listed = http.get(path, headers=named)
        assert listed.status_code == 200 and [r["text"] for r in listed.json()] == [
            "through the proxy"
        ]
        assert http.get("/", headers={"Host": "rk.home.arpa"}).status_code == 200
        for other in (f"evil.example:{port}", f"rk.home.arpa.evil.example:{port}", "home.arpa"):
            for method, url, body in (
                ("GET", path, None),
                ("POST", path, {"prompt": "planted", "in": "1h"}),
                ("GET", "/", None),
                ("POST", "/mcp/", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            ):
                got = http.request(method, url, json=body, headers={"Host": other})
                assert got.status_code == 403, (other, method, url, got.text)
                assert got.json()["error"]["code"] == "host_not_allowed", got.text
        after = http.get(path, headers={"Host": f"rk.home.arpa:{port}"}).json()
    assert [r["text"] for r in after] == ["through the proxy"]  # nothing planted


def test_a_rebinding_page_in_chromium_is_refused(api_server, sqlite_url, tmp_path):
    """evil.example resolves to 127.0.0.1 (a host-resolver rule): its page, served first
    by the attacker, then reaches this server by its own name. Before: the open API
    answered it as admin (sessions, conversation, a planted reminder, a deletion)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    srv = api_server(sqlite_url)
    port = srv.base_url.rsplit(":", 1)[1]
    victim = httpx.post(
        f"{srv.base_url}{BASE}/victim/reminders",
        json={"prompt": "the user's own", "in": "1h"},
        headers=srv.headers,
        timeout=30,
    ).json()
    evil = f"http://evil.example:{port}"
    with sync_api.sync_playwright() as pw:
        browser = _chromium(pw, "MAP evil.example 127.0.0.1")
        try:
            page = browser.new_page()
            login = json.loads(cli("api", "open", "--json", db=sqlite_url, home=tmp_path).stdout)[
                "url"
            ]
            page.goto(login)  # the user is logged in (a cookie for 127.0.0.1) in this browser
            page.route(
                f"{evil}/cats",
                lambda route: route.fulfill(
                    body=ATTACK_PAGE.replace("window.VICTIM", json.dumps(victim["id"])),
                    content_type="text/html",
                ),
            )
            page.goto(f"{evil}/cats")
            got = page.evaluate("window.results")
        finally:
            browser.close()
    for name in ("sessions", "view", "reminders", "create", "delete", "page"):
        status, body = got[name]
        assert status == 403 and "host_not_allowed" in body, (name, got[name])
    assert got["stream"] == "refused", got
    store = _store(sqlite_url, tmp_path)
    try:
        rems = store.reminders.find_reminders(session="victim")
        assert [(r.text, r.state) for r in rems] == [("the user's own", "active")]
    finally:
        store.close()


CROSS_PAGE = """<!doctype html><meta charset=utf-8><script>
window.results = (async () => {
  const target = TARGET;
  const out = {};
  try {  // a "simple" request: sent without a preflight, with the cookie (same site)
    await fetch(target + "/v1/projects/default/sessions/victim/reminders", {method: "POST",
      mode: "no-cors", credentials: "include", headers: {"content-type": "text/plain"},
      body: JSON.stringify({prompt: "planted cross-origin", in: "1m"})});
    out.post = "sent";
  } catch (e) { out.post = String(e); }
  const form = document.createElement("form");
  form.method = "POST"; form.enctype = "text/plain";
  form.action = target + "/v1/projects/default/sessions/victim/reminders";
  const field = document.createElement("input");
  field.name = '{"prompt": "planted by a form", "in": "1m", "x": "'; field.value = '"}';
  form.appendChild(field); document.body.appendChild(form);
  const frame = document.createElement("iframe"); frame.name = "sink"; form.target = "sink";
  document.body.appendChild(frame); form.submit();
  await new Promise((r) => setTimeout(r, 1500));
  // reads: CORS requests (they carry the Origin), a no-cors one, the event stream
  const read = async (name, path, init) => {
    try { const r = await fetch(target + path, init); out[name] = [r.status, r.type, await r.text()]; }
    catch (e) { out[name] = ["error", String(e)]; }
  };
  await read("sessions", "/v1/projects/default/sessions", {credentials: "include"});
  await read("reminders", "/v1/projects/default/sessions/victim/reminders", {credentials: "include"});
  await read("view", "/v1/projects/default/sessions/victim/view", {credentials: "include"});
  await read("page", "/", {credentials: "include"});
  await read("opaque", "/v1/projects/default/sessions/victim/reminders",
    {mode: "no-cors", credentials: "include"});
  out.stream = await new Promise((resolve) => {  // ?after=0: the whole trail, if it opened
    const s = new EventSource(target + "/v1/events?after=0", {withCredentials: true});
    const t = setTimeout(() => { s.close(); resolve("no event"); }, 5000);
    s.onmessage = (e) => { clearTimeout(t); s.close(); resolve("event: " + e.data); };
    s.onerror = () => { clearTimeout(t); s.close(); resolve("refused"); };
  });
  return out;
})();
</script>"""


def test_a_page_of_another_port_of_this_host_changes_and_reads_nothing(
    api_server, sqlite_url, tmp_path
):
    """A page on http://127.0.0.1:OTHER is the same site as the API to the browser (a
    cookie ignores ports): its requests carry the login cookie. Its writes are refused
    by their Origin and Sec-Fetch-Site; its reads (JSON routes, the page, the event
    stream from the start of the trail) get nothing: refused by their Origin, or
    answered opaque to the page; the log shows it."""
    sync_api = pytest.importorskip("playwright.sync_api")
    srv = api_server(sqlite_url, args=("-v",))
    secret = "the user's own words"
    made = httpx.post(
        f"{srv.base_url}{BASE}/victim/reminders",
        json={"prompt": secret, "in": "1h"},
        headers=srv.headers,
        timeout=30,
    )
    assert made.status_code == 201, made.text
    other = "http://127.0.0.1:9"  # fulfilled by the test: no server there
    with sync_api.sync_playwright() as pw:
        browser = _chromium(pw)
        try:
            page = browser.new_page()
            login = json.loads(cli("api", "open", "--json", db=sqlite_url, home=tmp_path).stdout)[
                "url"
            ]
            page.goto(login)
            page.route(
                f"{other}/x",
                lambda route: route.fulfill(
                    body=CROSS_PAGE.replace("TARGET", json.dumps(srv.base_url)),
                    content_type="text/html",
                ),
            )
            page.goto(f"{other}/x")
            got = page.evaluate("window.results")
            assert got["post"] == "sent"
        finally:
            browser.close()
    for name in ("sessions", "reminders", "view", "page", "opaque"):
        # a CORS read refused (403, no CORS header): the page sees a network error; the
        # no-cors one is opaque to it (status 0, no body)
        assert got[name][0] in ("error", 0) and secret not in json.dumps(got[name]), got[name]
    assert got["opaque"][1:] == ["opaque", ""], got["opaque"]
    assert got["stream"] == "refused", got["stream"]
    assert wait_for(lambda: srv.log.read_text().count(" 403") >= 6, 30), srv.log.read_text()
    log = srv.log.read_text()
    for path in ("/v1/events?after=0", f"{BASE}/victim/view", f"{BASE} ", "GET / "):
        assert any(path in ln and " 403" in ln for ln in log.splitlines()), (path, log)
    store = _store(sqlite_url, tmp_path)
    try:
        assert [r.text for r in store.reminders.find_reminders(session="victim")] == [secret]
    finally:
        store.close()


def test_the_login_url_is_good_once_and_the_log_keeps_no_secret(api_server, sqlite_url, tmp_path):
    """The login ticket, and a credential a client put in the address (``?access_token=``,
    as clients that cannot send headers do; the server reads none there), stay out of
    ``api -v``'s access log. Before: the address was logged as it came."""
    token = json.loads(
        cli(
            "token", "create", "--project", "default", "--json", db=sqlite_url, home=tmp_path
        ).stdout
    )["token"]
    srv = api_server(sqlite_url, args=("-v",))
    with httpx.Client(base_url=srv.base_url, timeout=30) as browser:
        first = browser.get(srv.login_url.removeprefix(srv.base_url))
        assert first.status_code == 303 and first.headers["location"] == "/"
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and srv.credential not in cookie
        assert browser.get("/v1/status").json()["scope"]["scope"] == "admin"
        path = f"{BASE}/web/reminders"
        refused = browser.post(path, json={"prompt": "x", "in": "1h"})
        assert (
            refused.status_code == 403 and refused.json()["error"]["code"] == "origin_not_allowed"
        )
        made = browser.post(
            path, json={"prompt": "x", "in": "1h"}, headers={"Origin": srv.base_url}
        )
        assert made.status_code == 201, made.text
        again = httpx.get(srv.login_url, timeout=30)
        assert again.status_code == 401 and again.json()["error"]["code"] == "login_expired"
    # credentials in the address: not read (401), and not logged
    for secret in (srv.credential, token):
        for query in (f"access_token={secret}", f"project=default&token={secret}"):
            got = httpx.get(f"{srv.base_url}{BASE}?{query}", timeout=30)
            assert got.status_code == 401, got.text
    log = srv.log.read_text()
    ticket = srv.login_url.split("ticket=", 1)[1]
    access = [ln for ln in log.splitlines() if '"GET /login' in ln]
    assert len(access) == 2 and all("ticket=…" in ln and ticket not in ln for ln in access), access
    sent = [ln for ln in log.splitlines() if f'"GET {BASE}?' in ln]
    assert len(sent) == 4, sent
    assert sum("access_token=…" in ln for ln in sent) == 2, sent
    assert srv.credential not in log and token not in log, sent


def test_the_credential_is_checked_before_the_body_and_bodies_are_bounded(api_server, sqlite_url):
    """Before: the body was read and parsed first (a bad one answered 400 before 401),
    with no bound (a 32 MB body: +830 MB peak memory)."""
    srv = api_server(sqlite_url)
    path = f"{srv.base_url}{BASE}/s1/reminders"

    def peak() -> int:
        text = Path(f"/proc/{srv.proc.pid}/status").read_text()
        return int(next(ln for ln in text.splitlines() if ln.startswith("VmHWM")).split()[1])

    httpx.get(f"{srv.base_url}/healthz", timeout=30)
    before = peak()
    bad = httpx.post(path, content=b"{not json", headers={"content-type": "application/json"})
    assert bad.status_code == 401, bad.text
    big = b'{"prompt": "' + b"x" * (32 * 1024 * 1024) + b'", "in": "1h"}'
    for headers, status in (({}, 401), (srv.headers, 413)):
        resp = httpx.post(
            path, content=big, headers={**headers, "content-type": "application/json"}, timeout=60
        )
        assert resp.status_code == status, resp.text[:300]

    def chunks():  # no Content-Length: counted while it is read
        for _ in range(64):
            yield b"x" * 65536

    streamed = httpx.post(path, content=chunks(), headers=srv.headers, timeout=60)
    assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "body_too_large"
    assert peak() - before < 64 * 1024, (before, peak())  # kB: far below one body's size


def test_a_patch_is_all_or_nothing(api_server, sqlite_url, tmp_path):
    """Before: a PATCH refused with 400 or 409 had already applied its earlier parts."""
    srv = api_server(sqlite_url)
    with httpx.Client(base_url=srv.base_url, headers=srv.headers, timeout=30) as http:
        rem = http.post(f"{BASE}/s1/reminders", json={"prompt": "old", "in": "1h"}).json()
        url = f"{BASE}/s1/reminders/{rem['id']}"
        for body, status, code in (
            ({"prompt": "new", "enabled": False, "snooze": "5 parsecs"}, 400, "invalid_duration"),
            ({"prompt": "new", "name": "n", "snooze": "999d"}, 400, "horizon_exceeded"),
        ):
            resp = http.patch(url, json=body)
            assert resp.status_code == status and resp.json()["error"]["code"] == code, resp.text
            got = http.get(url).json()
            assert (got["text"], got["label"], got["state"]) == ("old", None, "active"), got
        # refused inside the transaction: resuming into a deleted session
        other = http.post(f"{BASE}/s2/reminders", json={"prompt": "old", "in": "1h"}).json()
        assert (
            http.patch(f"{BASE}/s2/reminders/{other['id']}", json={"enabled": False}).status_code
            == 200
        )
        assert cli("session", "rm", "s2", db=sqlite_url, home=tmp_path).returncode == 0
        store = _store(sqlite_url, tmp_path)
        try:
            version = store.reminders.get_reminder(other["id"]).version
        finally:
            store.close()
        from remindkit.client import Client

        with Client(srv.base_url) as client:
            rems = client.session("default", "s2").reminders
            with pytest.raises(Exception) as refused:
                rems.update(other["id"], prompt="new", enabled=True)
            assert getattr(refused.value, "code", None) == "session_deleted"
        store = _store(sqlite_url, tmp_path)
        try:
            after = store.reminders.get_reminder(other["id"])
            assert (after.text, after.state, after.version) == ("old", "paused", version)
        finally:
            store.close()


def _stream(base_url: str, token: str, path: str = "/v1/events") -> socket.socket:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), 30)
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    )
    return sock


def _status(sock: socket.socket) -> bytes:
    head = sock.recv(4096)
    return head.split(b" ", 2)[1]


def test_one_token_takes_only_its_share_of_the_streams(api_server, sqlite_url, tmp_path):
    """Before: one read-only token could open all 1,000 streams of a server."""
    from remindkit.api.events import STREAMS_PER_CREDENTIAL

    reader = json.loads(
        cli(
            "token",
            "create",
            "--project",
            "default",
            "--read-only",
            "--json",
            db=sqlite_url,
            home=tmp_path,
        ).stdout
    )["token"]
    srv = api_server(sqlite_url)
    socks = []
    try:
        for _ in range(STREAMS_PER_CREDENTIAL):
            socks.append(_stream(srv.base_url, reader))
            assert _status(socks[-1]) == b"200"
        extra = _stream(srv.base_url, reader)
        socks.append(extra)
        assert _status(extra) == b"409"
        own = _stream(srv.base_url, srv.credential)  # the user's own share is left
        socks.append(own)
        assert _status(own) == b"200"
    finally:
        for s in socks:
            s.close()


def _ended_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server ends the stream (its last chunk), or None."""
    sock.settimeout(0.1)
    start = time.monotonic()
    seen = b""
    while time.monotonic() - start < seconds:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        if not data or b"0\r\n\r\n" in (seen + data)[-16:]:
            return time.monotonic() - start
        seen = (seen + data)[-64:]
    return None


def test_revoking_a_token_or_turning_the_feature_off_ends_its_streams(
    api_server, sqlite_url, tmp_path
):
    """Before: `token rm` and a feature turned off left open streams receiving."""
    assert cli("projects", "create", "p", db=sqlite_url, home=tmp_path).returncode == 0
    made = json.loads(
        cli(
            "token", "create", "--project", "default", "--json", db=sqlite_url, home=tmp_path
        ).stdout
    )
    of_p = json.loads(
        cli("token", "create", "--project", "p", "--json", db=sqlite_url, home=tmp_path).stdout
    )["token"]
    srv = api_server(sqlite_url)
    revoked = _stream(srv.base_url, made["token"])
    disabled = _stream(srv.base_url, of_p, "/v1/events?project=p")
    kept = _stream(srv.base_url, srv.credential)
    for s in (revoked, disabled, kept):
        assert _status(s) == b"200"
    assert cli("token", "rm", made["id"], db=sqlite_url, home=tmp_path).returncode == 0
    took = _ended_within(revoked, 10)
    assert took is not None and took < 2.0, took
    off = cli(
        "projects",
        "features",
        "disable",
        "reminders",
        "--project",
        "p",
        db=sqlite_url,
        home=tmp_path,
    )
    assert off.returncode == 0, off.stderr
    took = _ended_within(disabled, 10)
    assert took is not None and took < 2.0, took
    assert _ended_within(kept, 1.5) is None  # the user's own goes on
    for s in (revoked, disabled, kept):
        s.close()


def test_api_reset_shuts_out_the_old_credential_its_cookies_and_streams(
    api_server, sqlite_url, tmp_path
):
    """`remindkit api reset` (a credential that leaked): the old bearer, a browser's
    cookie from a login with it and its open event stream are refused; the new one
    and the clients that read it from the home get in."""
    srv = api_server(sqlite_url)
    old = srv.credential
    login = httpx.get(srv.login_url, follow_redirects=False, timeout=30)  # keeps no cookie
    assert login.status_code in (302, 303, 307), login.text
    assert login.cookies, login.headers
    cookies = {"Cookie": "; ".join(f"{k}={v}" for k, v in login.cookies.items())}
    with httpx.Client(base_url=srv.base_url, timeout=30) as http:
        assert http.get("/v1/status", headers=cookies).status_code == 200
        stream = _stream(srv.base_url, old)
        assert _status(stream) == b"200"
        reset = cli("api", "reset", "--json", db=sqlite_url, home=tmp_path)
        assert reset.returncode == 0, reset.stderr
        took = _ended_within(stream, 30)
        stream.close()
        print(f"the old credential's stream ended {took} s after the reset")
        assert took is not None
        from remindkit.credential import load_credential

        new = load_credential(tmp_path)
        assert new and new != old
        bearer = {"Authorization": f"Bearer {old}"}
        assert http.get("/v1/status", headers=bearer).status_code == 401
        assert http.get("/v1/status", headers=cookies).status_code == 401
        assert (
            http.post(
                f"{BASE}/x/reminders", json={"prompt": "p", "in": "1h"}, headers=bearer
            ).status_code
            == 401
        )
        fresh = {"Authorization": f"Bearer {new}"}
        assert http.get("/v1/status", headers=fresh).status_code == 200
    store = _store(sqlite_url, tmp_path)
    try:
        assert store.reminders.find_reminders(session="x") == []
    finally:
        store.close()


ATTACKER = """
import json, sys, urllib.request, urllib.error
url, home = sys.argv[1], sys.argv[2]
out = {}
try:
    open(home + "/api-credential").read()
    out["read"] = "read"
except OSError as e:
    out["read"] = type(e).__name__
for name, path in (("sessions", "/v1/projects/default/sessions"), ("status", "/v1/status")):
    try:
        with urllib.request.urlopen(url + path, timeout=20) as r:
            out[name] = r.status
    except urllib.error.HTTPError as e:
        out[name] = e.code
print(json.dumps(out))
"""


@pytest.fixture
def other_user():  # type: ignore[no-untyped-def]
    second_user_or_skip("useradd", "userdel")
    import secrets

    name = f"rkapi{secrets.token_hex(3)}"
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def test_another_local_user_cannot_read_the_credential_or_get_in(
    sqlite_url, other_user, api_server, monkeypatch
):
    """Before: with no token in the store, any local user was admin on loopback."""
    shared = Path(tempfile.mkdtemp(prefix="rkapi-", dir="/tmp"))
    os.chmod(shared, 0o755)
    home = shared / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)  # a home others may enter: the server tightens it
    try:
        monkeypatch.setenv("REMINDKIT_HOME", str(home))
        srv = api_server(sqlite_url, env={"REMINDKIT_HOME": str(home)})
        assert (home / "api-credential").stat().st_mode & 0o777 == 0o600
        assert home.stat().st_mode & 0o777 == 0o700
        done = subprocess.run(
            ["/usr/bin/python3", "-c", ATTACKER, srv.base_url, str(home)],
            user=other_user,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {
            "read": "PermissionError",
            "sessions": 401,
            "status": 401,
        }
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_a_flood_of_unfinished_heads_leaves_the_server_and_a_fire_working(
    api_server, sqlite_url, tmp_path
):
    """1,100 connections that never finish their request head, on a server limited to
    1,024 descriptors. Before: they took every descriptor, /healthz stopped answering and
    a fire due meanwhile was recorded failed. After: the oldest unfinished head gives way,
    /healthz answers through the flood and the fire is delivered."""
    seen = tmp_path / "delivered.txt"
    script = tmp_path / "agent.py"
    script.write_text(f"import sys\nopen({str(seen)!r}, 'a').write('delivered\\n')\nprint('ok')\n")
    added = cli(
        "session",
        "add",
        "agent",
        "--command",
        f"{sys.executable} {script}",
        db=sqlite_url,
        home=tmp_path,
    )
    assert added.returncode == 0, added.stderr
    srv = api_server(sqlite_url, nofile=1024)
    host, port = srv.base_url.removeprefix("http://").rsplit(":", 1)
    flood: list[socket.socket] = []
    stop = threading.Event()

    def attack() -> None:
        while not stop.is_set() and len(flood) < 1100:
            try:
                s = socket.create_connection((host, int(port)), 5)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                flood.append(s)
            except OSError:
                time.sleep(0.01)

    attacker = threading.Thread(target=attack, daemon=True)
    with httpx.Client(base_url=srv.base_url, headers=srv.headers, timeout=30) as http:
        made = http.post(
            f"{BASE}/agent/reminders", json={"prompt": "through the flood", "in": "4s"}
        )
        assert made.status_code == 201, made.text
        attacker.start()
        try:
            assert wait_for(lambda: len(flood) >= 1100, 60), len(flood)
            for _ in range(5):  # a normal request beside the flood, on a connection of its own
                with httpx.Client(base_url=srv.base_url, timeout=5) as fresh:
                    assert fresh.get("/healthz").status_code == 200
            assert wait_for(lambda: seen.exists() and seen.read_text(), 60), srv.log.read_text()[
                -3000:
            ]
            store = _store(sqlite_url, tmp_path)
            try:
                rid = made.json()["id"]
                assert wait_for(
                    lambda: (
                        [o.state for o in store.reminders.history(reminder_id=rid)] == ["delivered"]
                    ),
                    60,
                ), store.reminders.history(reminder_id=rid)
            finally:
                store.close()
        finally:
            stop.set()
            attacker.join(10)
            for s in flood:
                s.close()


def _closed_after(sock: socket.socket, seconds: float, drip: bytes = b"") -> tuple[float, bytes]:
    """Read until the server closes the connection (or ``seconds`` pass), sending a
    byte of ``drip`` every half second meanwhile; (when it closed, what it answered)."""
    sock.settimeout(0.05)
    start = time.monotonic()
    got = b""
    sent = 0
    next_byte = start + 0.5
    while time.monotonic() - start < seconds:
        if drip and sent < len(drip) and time.monotonic() >= next_byte:
            try:
                sock.sendall(drip[sent : sent + 1])
            except OSError:
                return time.monotonic() - start, got
            sent += 1
            next_byte += 0.5
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - start, got
        if not data:
            return time.monotonic() - start, got
        got += data
    raise AssertionError(f"still open after {seconds} s; answered {got[:200]!r}")


def test_slow_heads_and_bodies_are_cut_at_their_timeouts(api_server, sqlite_url):
    """A client that sends its request head a byte every half second, one that sends
    half a head and stops, and one that sends its body a byte every half second
    (``REMINDKIT_HEAD_TIMEOUT=2``, ``REMINDKIT_BODY_TIMEOUT=2``). Before: uvicorn had
    no timeout for either: each held its connection for as long as it kept sending."""
    srv = api_server(sqlite_url, env={"REMINDKIT_HEAD_TIMEOUT": "2", "REMINDKIT_BODY_TIMEOUT": "2"})
    host, port = srv.base_url.removeprefix("http://").rsplit(":", 1)
    head = f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\nX-Slow: ".encode() + b"x" * 100

    def connect() -> socket.socket:
        return socket.create_connection((host, int(port)), 30)

    # the head timeout counts from the connection's start, whatever arrives meanwhile
    with connect() as dripping:
        took, got = _closed_after(dripping, 30, drip=head)
    assert 1.9 <= took < 6, took
    assert got == b""  # closed unanswered: there was no request to answer
    with connect() as stopped:
        stopped.sendall(head[:40])
        took, got = _closed_after(stopped, 30)
    assert 1.9 <= took < 6 and got == b"", (took, got)
    # a whole head, then a body a byte at a time: 408 at the body timeout, then closed
    body = json.dumps({"prompt": "x" * 900, "in": "1h"}).encode()
    with connect() as slow_body:
        slow_body.sendall(
            (
                f"POST {BASE}/s1/reminders HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Authorization: Bearer {srv.credential}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
        )
        took, got = _closed_after(slow_body, 30, drip=body)
    assert 1.9 <= took < 6, took
    assert got.startswith(b"HTTP/1.1 408 "), got[:200]
    assert json.loads(got.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
    # the server goes on answering, and nothing was made by the cut request
    with httpx.Client(base_url=srv.base_url, headers=srv.headers, timeout=30) as http:
        assert http.get("/healthz").status_code == 200
        assert http.get(f"{BASE}/s1/reminders").json() == []
