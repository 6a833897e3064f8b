"""The per-project ``reminders`` feature: off, every route refuses and nothing of the
project fires; on again, what was missed fires once."""

from __future__ import annotations

import httpx
import pytest

from remindkit.client import Client
from remindkit.settings import Settings
from remindkit.store import open_store

from .conftest import cli, wait_for

pytestmark = [pytest.mark.api, pytest.mark.processes]


def test_a_disabled_project_refuses_and_does_not_fire_until_enabled(
    api_server, sqlite_url, tmp_path
):
    assert cli("projects", "create", "p", db=sqlite_url, home=tmp_path).returncode == 0
    srv = api_server(sqlite_url)
    store = open_store(sqlite_url, settings=Settings.from_env(env={}, home=tmp_path / "h"))
    try:
        with (
            Client(srv.base_url) as client,
            httpx.Client(base_url=srv.base_url, timeout=30, headers=srv.headers) as http,
        ):
            held = client.session("p", "s1").reminders.create("held back", in_="6s")
            store.projects.set_feature(
                "p", "reminders", False, now_us=0
            )  # at once: engines claim a second ahead
            control = client.session("default", "s2").reminders.create("control", in_="6s")
            base = "/v1/projects/p/sessions/s1/reminders"
            for resp in (
                http.get(base),
                http.post(base, json={"prompt": "x", "in": "1h"}),
                http.get(f"{base}/{held['id']}"),
                http.get(f"{base}/{held['id']}/history"),
                http.patch(f"{base}/{held['id']}", json={"enabled": False}),
                http.delete(f"{base}/{held['id']}"),
                http.get("/v1/projects/p/sessions"),
            ):
                assert (
                    resp.status_code == 403 and resp.json()["error"]["code"] == "feature_disabled"
                ), resp.text
            # the control reminder, due after the held one, fires; the held one does not
            assert wait_for(lambda: store.reminders.history(reminder_id=control["id"]), 60), (
                "the control reminder never fired"
            )
            assert store.reminders.history(reminder_id=held["id"]) == []
            assert store.reminders.get_reminder(held["id"]).state == "active"
            on = cli(
                "projects",
                "features",
                "enable",
                "reminders",
                "--project",
                "p",
                db=sqlite_url,
                home=tmp_path,
            )
            assert on.returncode == 0
            fired = wait_for(
                lambda: (
                    (h := store.reminders.history(reminder_id=held["id"]))
                    and h[0].fired_at is not None
                    and h
                ),
                60,
            )
            assert len(fired) == 1
            # s1 has no agent to deliver to: the fire waits for one, and stays the user's until then
            got = wait_for(
                lambda: (
                    (r := client.session("p", "s1").reminders.get(held["id"]))["delivery"] and r
                ),
                60,
            )
            assert got["state"] == "active" and got["delivery"]["state"] == "waiting"
    finally:
        store.close()


def test_feature_commands_refuse_unknown_projects_and_names(sqlite_url, tmp_path):
    off = cli(
        "projects",
        "features",
        "disable",
        "reminders",
        "--project",
        "default",
        db=sqlite_url,
        home=tmp_path,
    )
    assert off.returncode == 0 and "reminders off" in off.stdout
    assert (
        cli("projects", "features", "enable", "reminders", db=sqlite_url, home=tmp_path).returncode
        == 0
    )
    got = cli(
        "projects",
        "features",
        "disable",
        "reminders",
        "--project",
        "ghost",
        db=sqlite_url,
        home=tmp_path,
    )
    assert got.returncode == 1 and "project_not_found" in got.stderr
    got = cli("projects", "create", "no spaces", db=sqlite_url, home=tmp_path)
    assert got.returncode == 1 and "invalid_project" in got.stderr
    listed = cli("projects", "ls", db=sqlite_url, home=tmp_path)
    assert listed.stdout.splitlines() == ["default  reminders on"]
