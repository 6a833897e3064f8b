"""Tokens against the store on both backends: only the hash is kept; scopes."""

from __future__ import annotations

import pytest

from remindkit.api.tokens import AgentTokens, authenticate, create_token, digest
from remindkit.errors import Forbidden, Unauthorized
from remindkit.reminders import Reminders

pytestmark = pytest.mark.api


def test_only_the_hash_is_stored_and_scopes_hold(store):
    token_id, token = create_token(
        store.projects, project="acme", session="s1", read_only=True, now_us=1
    )
    rows = store.projects.list_tokens()
    assert [r["id"] for r in rows] == [token_id] and token not in repr(rows)
    assert store.projects.token_by_hash(digest(token))["scope"] == "session"
    who = authenticate(store.projects, token, open_when_none=True)
    who.may_use("acme", "s1")
    for project, session in (("acme", "s2"), ("acme", None), ("other", "s1")):
        with pytest.raises(Forbidden):
            who.may_use(project, session)
    with pytest.raises(Forbidden) as exc:
        who.may_write()
    assert exc.value.code == "read_only"
    with pytest.raises(Unauthorized):  # a token exists: none is no longer enough
        authenticate(store.projects, None, open_when_none=True)
    assert store.projects.remove_token(token_id)
    with pytest.raises(Unauthorized):
        authenticate(store.projects, token, open_when_none=True)
    assert authenticate(store.projects, None, open_when_none=True).scope == "admin"
    with pytest.raises(Unauthorized):
        authenticate(store.projects, None, open_when_none=False)


def test_agent_commands_get_a_token_of_their_own_session(store):
    Reminders(store).create("x", session="s9", in_="1h")
    agents = AgentTokens(store.projects)
    env = agents.env("s9", now_us=1)
    assert env == agents.env("s9", now_us=2)  # one per session
    who = authenticate(store.projects, env["REMINDKIT_TOKEN"], open_when_none=False)
    assert (who.scope, who.project, who.session, who.read_only) == (
        "session",
        "default",
        "s9",
        False,
    )
    agents.revoke_all()
    assert store.projects.list_tokens() == []
