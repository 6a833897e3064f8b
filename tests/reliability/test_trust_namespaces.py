"""Session ids that cannot be squatted. Each project is a namespace of session ids,
and a surface takes only a session of its own kind and project. The attack: a token
of project ``webchat`` creates ``cursor`` (the id ``mcp install`` gives Cursor) and
``tg:111`` (a Telegram thread) first, then waits for the MCP server and the bot to
take them over. Real processes: ``remindkit api``, ``remindkit mcp`` under the
official MCP client, ``remindkit telegram`` against the Bot API stand-in."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import text

from remindkit.checks import session_key, session_name, session_project
from remindkit.clock import SystemClock
from remindkit.errors import Conflict
from remindkit.models import Session
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import open_store
from remindkit.store.db import make_engine, migrate

from .attacks import record
from .test_trust_runtime import cli as run

pytestmark = pytest.mark.reliability
ROOT = Path(__file__).resolve().parents[2]


def cli(home: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDKIT_")}
    env.update(REMINDKIT_HOME=str(home), REMINDKIT_DB=url, REMINDKIT_TZ="UTC")
    return run(env, *args)


@pytest.mark.parametrize(
    ("project", "name", "key", "home", "shown"),
    [
        ("default", "cursor", "cursor", "default", "cursor"),
        ("webchat", "cursor", "@webchat/cursor", "webchat", "cursor"),
        ("webchat", "tg:111", "@webchat/tg:111", "webchat", "tg:111"),
        ("webchat", "@webchat/cursor", "@webchat/cursor", "webchat", "cursor"),  # comes back
        ("webchat", "@other/x", "@webchat/@other/x", "webchat", "@other/x"),
        ("default", "@webchat/x", "@webchat/x", "webchat", "x"),  # webchat's: refused in default
        (
            "default",
            "claude-code:/home/u/p",
            "claude-code:/home/u/p",
            "default",
            "claude-code:/home/u/p",
        ),
    ],
)
def test_session_keys(project: str, name: str, key: str, home: str, shown: str) -> None:
    assert session_key(project, name) == key
    assert (session_project(key), session_name(key)) == (home, shown)


def test_the_store_keeps_each_project_to_its_namespace(store) -> None:
    api = Reminders(store)
    store.projects.create_project("webchat", now_us=1)
    made = api.add("x", session="cursor", project="webchat", in_="1h").reminder
    assert (
        made.session == "@webchat/cursor"
        and store.projects.project_of("@webchat/cursor") == "webchat"
    )
    assert store.sessions.get_session("cursor") is None
    # an id of webchat's namespace is not made in default, by any surface
    with pytest.raises(Exception) as refused:
        api.add("y", session="@webchat/other", project="default", in_="1h")
    assert getattr(refused.value, "code", None) == "session_not_found"
    # the local user (no project) may name it: the session is made in webchat
    api.add("z", session="@webchat/third", in_="1h")
    assert store.projects.project_of("@webchat/third") == "webchat"
    # a surface takes only its own
    assert api.own_session("cursor", adapter="mcp") is None  # free: default's
    with pytest.raises(Conflict) as taken:
        api.own_session("@webchat/cursor", adapter="mcp")
    assert taken.value.code == "session_taken"
    store.sessions.put_session(Session("tg:5", adapter="command", config={}), now_us=1)
    with pytest.raises(Conflict):
        api.own_session("tg:5", adapter="telegram")
    api.add("w", session="tg:6", in_="1h")  # no adapter: the MCP server may bind it, the bot not
    assert api.own_session("tg:6", adapter="mcp") is not None
    with pytest.raises(Conflict):
        api.own_session("tg:6", adapter="telegram", untyped=False)


def test_sessions_made_in_a_project_before_namespaces_move_to_it(store_url, settings) -> None:
    """A store of the previous schema, where a webchat token had made ``cursor``: the
    migration moves it (and what names it) to ``@webchat/cursor``; ``cursor`` is free."""
    old = make_engine(store_url)
    migrate(old, "0006")
    now = SystemClock().now_us()
    with old.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO projects (name, reminders, created_at, updated_at) VALUES ('webchat', true, 1, 1)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO sessions (id, adapter, config, state, created_at, last_active_at, project) "
                "VALUES ('cursor', NULL, '{}', 'active', :now, :now, 'webchat'),"
                " ('mine', NULL, '{}', 'active', :now, :now, 'default')"
            ),
            {"now": now},
        )
        spec = '{"first_at":"2030-01-01T00:00:00Z","kind":"at","repeat":1,"tz":"UTC","v":1}'
        for rid, sid in (("rem_planted00001", "cursor"), ("rem_mine00000001", "mine")):
            conn.execute(
                text(
                    "INSERT INTO reminders (id, session_id, text, kind, spec, tz, state, next_fire_at, "
                    "created_at, updated_at) VALUES (:id, :sid, 'x', 'at', :spec, 'UTC', 'active', 1, :now, :now)"
                ),
                {"id": rid, "sid": sid, "spec": spec, "now": now},
            )
        conn.execute(
            text(
                "INSERT INTO events (at, kind, surface, session_id, reminder_id) "
                "VALUES (:now, 'created', 'api', 'cursor', 'rem_planted00001')"
            ),
            {"now": now},
        )
        conn.execute(
            text(
                "INSERT INTO api_tokens (id, hash, project, session, read_only, created_at) "
                "VALUES ('tok_1', 'h', 'webchat', 'cursor', false, 1)"
            )
        )
    old.dispose()
    store = open_store(store_url, settings=settings)
    try:
        api = Reminders(store, settings=settings)
        assert api.get("rem_planted00001").session == "@webchat/cursor"
        assert api.get("rem_mine00000001").session == "mine"
        assert store.sessions.get_session("cursor") is None
        assert store.projects.project_of("@webchat/cursor") == "webchat"
        assert [e.session for e in api.events("rem_planted00001")] == ["@webchat/cursor"]
        assert [t["session"] for t in store.projects.list_tokens()] == ["@webchat/cursor"]
    finally:
        store.close()


def test_a_token_of_another_project_cannot_squat_session_ids(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("mcp")
    pytest.importorskip("telegram")
    import anyio
    import httpx

    from tests.api.conftest import ApiServer
    from tests.channels.botapi_standin import BotAPI
    from tests.channels.conftest import BotProcess
    from tests.mcp.conftest import mcp_client

    url = f"sqlite:///{tmp_path / 'rk.db'}"
    home = tmp_path / "home"
    home.mkdir()
    assert cli(home, url, "projects", "create", "webchat").returncode == 0
    made = cli(home, url, "token", "create", "--project", "webchat")
    assert made.returncode == 0, made.stderr
    token = made.stdout.split()[0]
    server = ApiServer(url, home, env={"REMINDKIT_HOME": str(home)}).wait_ready()
    botapi = BotAPI().start()
    bot = None
    http = httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    try:
        for sid in ("cursor", "tg:111"):  # first: before Cursor or the Telegram user came
            got = http.post(
                f"/v1/projects/webchat/sessions/{quote(sid, safe='')}/reminders",
                json={"prompt": f"planted in {sid}", "in": "2s"},
            )
            assert got.status_code == 201 and got.json()["session"] == sid, got.text

        store = open_store(url, settings=Settings.from_env(env={}, home=home))
        api = Reminders(store)

        def planted_fired() -> bool:
            rems = [r for r in api.list(all=True) if r.text == "planted in cursor"]
            return bool(rems) and any(o.fired_at for o in api.history(rems[0].id))

        async def cursor() -> list[str]:
            async with mcp_client(url, home, "--session", "cursor") as c:
                mine = await c.call(
                    "schedule_create", {"prompt": "Cursor's own note", "after": "8s"}
                )
                assert not mine.is_error, mine
                listed = await c.call("schedule_list")
                texts = [r["prompt"] for r in listed.structured_content["reminders"]]
                assert texts == ["Cursor's own note"], texts
                await c.wait_channel(1, 60)
                with anyio.fail_after(60):
                    while not planted_fired():
                        await anyio.sleep(0.1)
                await anyio.sleep(3)  # the planted fire, had the session been taken, is pushed now
                return [r.params.content for r in c.channel]

        pushed = anyio.run(cursor)
        assert len(pushed) == 1 and "Cursor's own note" in pushed[0], pushed
        seen = http.get("/v1/projects/webchat/sessions/cursor/reminders").json()
        assert [r["text"] for r in seen] == ["planted in cursor"], seen
        assert http.get("/v1/projects/default/sessions/cursor/reminders").status_code == 403
        cursor_session = store.sessions.get_session("cursor")
        assert cursor_session is not None and cursor_session.adapter == "mcp"

        bot = BotProcess(
            url,
            botapi,
            home,
            args=["--allow", "111"],
            env={"RK_AGENT_LOG": str(home / "agent.log")},
            name="bot",
        )
        botapi.user_says(111, "my bank PIN is 4321")
        botapi.wait_for(lambda: any("4321" in t for t in botapi.texts(111)), message="the echo")
        view = http.get(f"/v1/projects/webchat/sessions/{quote('tg:111', safe='')}/view").json()
        assert all("4321" not in str(line) for line in view["lines"]), view
        thread = store.sessions.get_session("tg:111")
        assert thread is not None and thread.adapter == "telegram"
        assert store.projects.project_of("tg:111") == "default"
        store.close()
    finally:
        http.close()
        if bot is not None:
            bot.stop()
        botapi.close()
        server.stop()
    record(
        "a `webchat` token makes `cursor` and `tg:111` before Cursor's MCP server and the bot do",
        "both taken over: the token read Cursor's reminders and the Telegram user's message, and pushed text into Cursor's conversation",
        "made as `@webchat/cursor`, `@webchat/tg:111`; the MCP server and the bot take only sessions of their own kind and project",
    )
