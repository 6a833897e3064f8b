"""Tokens against the store on both backends: only the hash is kept; scopes."""

from __future__ import annotations

import pytest

from remindkit.api.tokens import AgentTokens, admit, authenticate, create_token, digest
from remindkit.errors import Forbidden, NotFound, Unauthorized
from remindkit.reminders import Reminders

pytestmark = pytest.mark.api


def test_only_the_hash_is_stored_and_scopes_hold(store):
    token_id, token = create_token(
        store.projects, project="acme", session="s1", read_only=True, now_us=1
    )
    rows = store.projects.list_tokens()
    assert [r["id"] for r in rows] == [token_id] and token not in repr(rows)
    assert store.projects.token_by_hash(digest(token))["scope"] == "session"
    who = authenticate(store.projects, token)
    who.may_use("acme", "s1")
    for project, session in (("acme", "s2"), ("acme", None), ("other", "s1")):
        with pytest.raises(Forbidden):
            who.may_use(project, session)
    with pytest.raises(Forbidden) as exc:
        who.may_write()
    assert exc.value.code == "read_only"
    assert store.projects.remove_token(token_id)
    with pytest.raises(Unauthorized):
        authenticate(store.projects, token)
    for nothing in (None, ""):  # no mode without a credential, with tokens or without
        with pytest.raises(Unauthorized):
            authenticate(store.projects, nothing)


def test_admit_checks_scope_and_project_from_one_read(store):
    """admit() answers as may_use + may_write + require_project do."""
    rems = Reminders(store)
    rems.create("x", session="s1", in_="1h")  # s1 in the default project
    _id, token = create_token(
        store.projects, project="default", session="s1", read_only=False, now_us=1
    )
    _id, reader = create_token(
        store.projects, project="default", session="s1", read_only=True, now_us=1
    )
    with pytest.raises(Unauthorized):
        authenticate(store.projects, "rk_" + "0" * 40)
    mine = authenticate(store.projects, token)
    sess = admit(store.projects, mine, "default", "s1", write=True)
    assert (mine.scope, mine.session, sess.id) == ("session", "s1", "s1")
    with pytest.raises(Forbidden):  # another session
        admit(store.projects, mine, "default", "s2")
    ro = authenticate(store.projects, reader)
    with pytest.raises(Forbidden) as refused:
        admit(store.projects, ro, "default", "s1", write=True)
    assert refused.value.code == "read_only"
    assert admit(store.projects, ro, "default", "s1").id == "s1"
    _id, admin = create_token(store.projects, project=None, session=None, read_only=False, now_us=1)
    root = authenticate(store.projects, admin)
    assert admit(store.projects, root, "default", "nope") is None
    with pytest.raises(NotFound) as missing:
        admit(store.projects, root, "nowhere", None)
    assert missing.value.code == "project_not_found"
    store.projects.set_feature("default", "reminders", False, now_us=2)
    with pytest.raises(Forbidden) as off:
        admit(store.projects, mine, "default", "s1")
    assert off.value.code == "feature_disabled"


def test_agent_commands_get_a_token_of_their_own_session(store):
    Reminders(store).create("x", session="s9", in_="1h")
    agents = AgentTokens(store.projects)
    env = agents.env("s9", now_us=1)
    assert env == agents.env("s9", now_us=2)  # one per session
    who = authenticate(store.projects, env["REMINDKIT_TOKEN"])
    assert (who.scope, who.project, who.session, who.read_only) == (
        "session",
        "default",
        "s9",
        False,
    )
    agents.revoke_all()
    assert store.projects.list_tokens() == []


AGENT = """
import json, os, sys, urllib.request, urllib.error

def get(path):
    req = urllib.request.Request(os.environ["REMINDKIT_API_URL"] + path)
    req.add_header("Authorization", "Bearer " + os.environ["REMINDKIT_TOKEN"])
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code

mine = get("/v1/projects/default/sessions/s1/reminders")
other = get("/v1/projects/default/sessions/s2/reminders")
with open(sys.argv[1], "a") as fh:
    fh.write(json.dumps({"mine": mine, "other": other, "session": os.environ["REMINDKIT_SESSION"]}) + "\\n")
print("checked")
"""


def test_agent_commands_of_the_api_server_reach_it_as_their_session(
    api_server, sqlite_url, tmp_path
):
    """The engine in `remindkit api` runs a command session's turn with REMINDKIT_TOKEN
    (a token of that session) and REMINDKIT_API_URL: the agent reads its own session's
    reminders and is refused another's; the tokens go when the server stops."""
    import json
    import sys

    from .conftest import cli, wait_for

    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    seen = tmp_path / "seen.jsonl"
    home = tmp_path
    added = cli(
        "session",
        "add",
        "s1",
        "--command",
        f"{sys.executable} {script} {seen}",
        db=sqlite_url,
        home=home,
    )
    assert added.returncode == 0, added.stderr
    server = api_server(sqlite_url)
    made = cli("remind", "check", "--session", "s1", "--in", "1s", db=sqlite_url, home=home)
    assert made.returncode == 0, made.stderr
    wait_for(lambda: seen.exists() and seen.read_text().strip(), timeout=60)
    got = json.loads(seen.read_text().splitlines()[0])
    assert got == {"mine": 200, "other": 403, "session": "s1"}
    # the agent's token never changes how the user's own clients get in (before: the
    # open API locked itself at the first command turn, refusing them)
    from remindkit.client import Client

    with Client(server.base_url) as own:
        assert own.status()["scope"]["scope"] == "admin"
    listed = cli("token", "ls", "--json", db=sqlite_url, home=home)
    assert [t["session"] for t in json.loads(listed.stdout)] == ["s1"]
    assert server.stop() == 0  # a graceful stop (uvicorn re-raises SIGTERM otherwise)
    listed = cli("token", "ls", "--json", db=sqlite_url, home=home)
    assert json.loads(listed.stdout) == []


def test_access_reads_what_the_single_lookups_read(store):
    """Projects.access (one statement through the driver) answers as token_by_hash or
    count_tokens, get_project and session_in_project do, for every shape it is asked."""
    p = store.projects
    rems = Reminders(store)
    rems.create("x", session="s1", in_="1h")  # s1 in the default project
    p.create_project("other", now_us=5)
    rems.create("y", session="o1", in_="1h", project="other")

    def expect(hashed, project, sid):
        token = None if hashed is None else p.token_by_hash(hashed)
        tokens = p.count_tokens() if hashed is None else None
        sess = None if sid is None else p.session_in_project(project, sid, now_us=9)
        return token, tokens, p.get_project(project), sess

    def check():
        _id, ro = create_token(p, project="default", session="s1", read_only=True, now_us=3)
        for hashed in (None, digest(ro), "0" * 64):
            for project in ("default", "other", "nowhere"):
                for sid in (None, "s1", "o1", "nope"):
                    got = p.access(hashed, project, sid, now_us=9)
                    assert (got.token, got.tokens, got.project, got.session) == expect(
                        hashed, project, sid
                    ), (hashed, project, sid)

    assert p.access(None, "default", "s1", now_us=9).tokens == 0
    check()
    p.set_feature("other", "reminders", False, now_us=8)
    check()
    assert p.access(None, "other", None).project == {
        "name": "other",
        "features": {"reminders": False},
    }
