"""Upgrades and damaged rows: a store written by the previous schema migrates
forward and keeps working; a row that cannot be read is quarantined and
reported, never deleted, and never stops the other reminders."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from sqlalchemy import text

from remindkit.alerts import NullAlerter
from remindkit.cli.main import main
from remindkit.clock import to_us
from remindkit.engine import Engine
from remindkit.errors import StoreError
from remindkit.models import Session
from remindkit.reminders import Reminders
from remindkit.store import open_store
from remindkit.store.db import current_revision, head_revision, make_engine, migrate

pytestmark = pytest.mark.reliability

SPEC = '{"first_at":"%s","kind":"at","repeat":1,"tz":"UTC","v":1}'


def test_store_from_the_previous_schema_migrates_forward(store_url, settings, clock):
    old = make_engine(store_url)
    migrate(old, "0001")
    assert current_revision(old) == "0001"
    due = clock.now() + timedelta(minutes=1)
    with old.begin() as conn:  # rows as revision 0001 wrote them
        conn.execute(
            text(
                "INSERT INTO sessions (id, adapter, config, state, created_at, last_active_at) "
                "VALUES ('s1', 'python', '{}', 'active', :now, :now)"
            ),
            {"now": clock.now_us()},
        )
        conn.execute(
            text(
                "INSERT INTO reminders (id, session_id, label, text, kind, spec, tz, state, next_fire_at, "
                "fired_count, alarm, urgency, misfire, catchup_cap, on_busy, source, snoozed, created_at, "
                "updated_at, version) VALUES ('rem_old000000001', 's1', 'old', 'from 0001', 'at', :spec, 'UTC', "
                "'active', :due, 0, false, 'normal', 'latest', 10, 'wait', 'api', false, :now, :now, 1)"
            ),
            {
                "spec": SPEC % due.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "due": to_us(due),
                "now": clock.now_us(),
            },
        )
    old.dispose()

    store = open_store(store_url, settings=settings)  # migrates on open
    try:
        assert current_revision(store.engine) == head_revision() != "0001"
        api = Reminders(store, clock=clock, settings=settings)
        (rem,) = api.list()
        assert rem.id == "rem_old000000001" and rem.label == "old" and rem.next_fire_at == due
        got = []
        engine = Engine(store, clock=clock, settings=settings, inline=True, alerter=NullAlerter())
        engine.adapters.get("python").register("s1", lambda m, f: got.append([x.key for x in f]))
        clock.advance(61)
        engine.tick(clock.now())
        engine.shutdown()
        assert got == [[f"rem_old000000001@{due.strftime('%Y-%m-%dT%H:%M:%SZ')}"]]
    finally:
        store.close()


def test_a_newer_schema_is_refused_and_left_alone(sqlite_url, settings):
    store = open_store(sqlite_url, settings=settings)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    store.close()
    with pytest.raises(StoreError) as exc:
        open_store(sqlite_url, settings=settings)
    assert exc.value.code == "schema_too_new"
    eng = make_engine(sqlite_url)
    assert current_revision(eng) == "9999"
    eng.dispose()


BROKEN = [
    ("spec_not_json", {"spec": "{not json"}),
    ("spec_from_the_future", {"spec": '{"v": 99, "kind": "quantum"}'}),
    (
        "unknown_zone",
        {"spec": '{"v":1,"kind":"cron","cron":"0 9 * * *","tz":"Mars/Olympus","repeat":null}'},
    ),
    ("bad_cron", {"spec": '{"v":1,"kind":"cron","cron":"99 99 * * *","tz":"UTC","repeat":null}'}),
]


@pytest.mark.parametrize("name, change", BROKEN, ids=[b[0] for b in BROKEN])
def test_unreadable_row_is_quarantined_not_deleted(
    store, clock, settings, name, change, monkeypatch, tmp_path
):
    api = Reminders(store, clock=clock, settings=settings)
    store.sessions.put_session(Session("s1", adapter="python"), now_us=clock.now_us())
    good = api.create("fine", session="s1", in_="1m")
    bad = api.create("to be damaged", session="s1", in_="1m")
    with store.engine.begin() as conn:
        conn.execute(
            text("UPDATE reminders SET spec = :spec WHERE id = :id"),
            {"spec": change["spec"], "id": bad.id},
        )
    got = []
    engine = Engine(store, clock=clock, settings=settings, inline=True, alerter=NullAlerter())
    engine.adapters.get("python").register("s1", lambda m, f: got.extend(x.reminder_id for x in f))
    clock.advance(61)
    engine.tick(clock.now())
    engine.tick(clock.now())
    engine.shutdown()
    assert got == [good.id], "the damaged row must not stop the good one"
    ((qid, why),) = store.reminders.quarantined()
    assert qid == bad.id and why.startswith("quarantined: unreadable row")
    with store.engine.connect() as conn:  # still there, untouched apart from its state
        row = conn.execute(
            text("SELECT spec, state FROM reminders WHERE id = :id"), {"id": bad.id}
        ).one()
    assert row.spec == change["spec"] and row.state == "failed"
    assert engine.errors == 0
    if store.dialect.name == "sqlite":  # and the command line reports it
        monkeypatch.setenv("REMINDKIT_HOME", str(tmp_path / "h"))
        out = io.StringIO()
        assert (
            main(
                ["status", "--json", "--db", store_url_of(store)], stdout=out, stderr=io.StringIO()
            )
            == 0
        )
        assert json.loads(out.getvalue())["quarantined"][0]["id"] == bad.id


def store_url_of(store) -> str:  # type: ignore[no-untyped-def]
    return store.engine.url.render_as_string(hide_password=False)


def test_quarantine_becomes_a_column_and_goes_back(store_url, settings, clock):
    """Migration 0008: reminders that earlier versions set aside (state failed, a
    ``quarantined: …`` last error) get their Quarantine in the new column, and a
    failed one that was not set aside gets none; back at 0007 the column is gone and
    the last errors say what they said."""
    eng = make_engine(store_url)
    migrate(eng, "0007")
    spec = SPEC % "2026-01-05T09:01:00Z"
    rows = {
        "rem_plan00000001": "quarantined: refused plan (PlanRefused: catch-up cap 5000 is outside 1-100)",
        "rem_read00000001": "quarantined: unreadable row (JSONDecodeError: Expecting value)",
        "rem_fail00000001": "the session's turn failed: exit status 2",
    }
    with eng.begin() as conn:
        for rid, why in rows.items():
            conn.execute(
                text(
                    "INSERT INTO reminders (id, text, kind, spec, tz, state, last_error, created_at,"
                    " updated_at) VALUES (:id, 't', 'at', :spec, 'UTC', 'failed', :why, 0, 0)"
                ),
                {"id": rid, "spec": spec, "why": why},
            )
    indexes = _reminder_indexes(eng)
    migrate(eng, "0008")

    def read() -> dict[str, tuple[object, ...]]:
        with eng.connect() as conn:
            got = conn.execute(text("SELECT * FROM reminders ORDER BY id")).mappings().all()
        return {r["id"]: (r.get("quarantine"), r["last_error"]) for r in got}

    assert read() == {
        "rem_fail00000001": (None, rows["rem_fail00000001"]),
        "rem_plan00000001": ("refused_plan", rows["rem_plan00000001"]),
        "rem_read00000001": ("unreadable_row", rows["rem_read00000001"]),
    }
    store = open_store(store_url, settings=settings)
    try:
        assert dict(store.reminders.quarantined()) == {
            "rem_plan00000001": rows["rem_plan00000001"],
            "rem_read00000001": rows["rem_read00000001"],
        }
    finally:
        store.close()
    downgrade(eng, "0007")
    assert current_revision(eng) == "0007"
    with eng.connect() as conn:
        got = conn.execute(text("SELECT * FROM reminders ORDER BY id")).mappings().all()
    assert all("quarantine" not in r for r in got)
    assert {r["id"]: r["last_error"] for r in got} == rows
    assert _reminder_indexes(eng) == indexes  # SQLite's copy of the table kept them (partial)
    eng.dispose()


def _reminder_indexes(engine) -> list[str]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            sql = "SELECT sql FROM sqlite_master WHERE tbl_name = 'reminders' AND type = 'index'"
        else:
            sql = "SELECT indexdef FROM pg_indexes WHERE tablename = 'reminders'"
        return sorted(r[0] for r in conn.execute(text(sql)) if r[0])


def downgrade(engine, target: str) -> None:  # type: ignore[no-untyped-def]
    """Alembic's downgrade on the store's migrations (remindkit itself only upgrades)."""
    from alembic import command
    from alembic.config import Config

    from remindkit.store.db import MIGRATIONS

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, target)
        conn.commit()
