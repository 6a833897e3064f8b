"""The command line's reads through the sqlite3 driver alone (remindkit.store.lite) give
what the store gives, and are only used where they can."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from remindkit.clock import to_us
from remindkit.engine.plan import plan_fire
from remindkit.models import DELIVERED, FAILED, WAITING
from remindkit.reminders import Reminders
from remindkit.store import Outcome, SqlStore, open_store
from remindkit.store.db import head_revision as store_head
from remindkit.store.lite import head_revision, open_lite, sqlite_file


@pytest.fixture
def api(sqlite_store: SqlStore, clock: Any, settings: Any) -> Reminders:
    return Reminders(sqlite_store, clock=clock, settings=settings)


def _fill(api: Reminders, store: SqlStore, clock: Any) -> None:
    """Reminders of two sessions and of none, active, paused, cancelled and done ones,
    a fire waiting for its session, a failed and a delivered fire."""
    for i in range(3):
        api.create(f"s1 #{i}", session="s1", in_=f"{30 - i}m")
        clock.advance(1)  # creation order is not id order, nor next-fire order
    api.create("no session", in_="7m")
    api.create("a set_callback timer", session="s1", in_="2m", source="callback")
    api.pause([api.create("paused", session="s2", in_="1h").id])
    api.cancel([api.create("cancelled", session="s2", in_="1h").id])
    wait = api.create("waits", session="s2", every="1m")
    fail = api.create("fails", session="s3", in_="1m")
    done = api.create("done", session="s3", in_="1m")
    clock.advance(61)
    now = clock.now()
    fires, _n = store.claims.claim_due(
        now_us=to_us(now),
        horizon_us=to_us(now),
        owner="e1",
        lease_us=30_000_000,
        limit=100,
        plan=lambda r: plan_fire(r, now),
    )
    by = {f.reminder_id: f for f in fires}
    t = clock.now_us()
    store.outcomes.finish(
        [
            Outcome(
                by[wait.id].occurrence_id, by[wait.id].token, WAITING, wait_for="idle", error="busy"
            ),
            Outcome(by[fail.id].occurrence_id, by[fail.id].token, FAILED, fired_at_us=t, error="x"),
            Outcome(
                by[done.id].occurrence_id,
                by[done.id].token,
                DELIVERED,
                fired_at_us=t - 1,
                delivered_at_us=t - 1,
            ),
        ]
    )


def test_the_lite_reads_are_the_stores(
    api: Reminders, sqlite_store: SqlStore, sqlite_url: str, clock: Any, settings: Any
) -> None:
    _fill(api, sqlite_store, clock)
    lite = open_lite(sqlite_url, settings=settings)
    assert lite is not None
    try:
        light = Reminders(lite, clock=clock, settings=settings)  # type: ignore[arg-type]
        for session in (Any, None, "s1", "s2", "s3", "nobody"):
            for everything in (False, True):
                assert light.list(session=session, all=everything) == api.list(
                    session=session, all=everything
                ), (session, everything)
            for states in (["active"], ["paused"], ["active", "paused"], []):
                for order in ("created", "next"):
                    assert lite.find_reminders(
                        session=session, states=states, order=order
                    ) == sqlite_store.reminders.find_reminders(
                        session=session, states=states, order=order
                    ), (session, states, order)
        waiting = [r for r in light.list(session="s2") if r.delivery is not None]
        assert len(waiting) == 1 and waiting[0].delivery.reason == "busy"  # type: ignore[union-attr]
        assert light.paused_all is False
        api.pause_all()
        assert light.paused_all is True
        now = clock.now_us()
        summary = lite.status_summary(now_us=now)
        assert summary == sqlite_store.reports.status_summary(now_us=now)
        assert summary["sessions"]["s3"]["failed"] is True and summary["paused_all"] is True
        assert summary["sessions"]["s1"]["callbacks"]["active"] == 1
        assert lite.status_summary(now_us=now, max_sessions=1) == (
            sqlite_store.reports.status_summary(now_us=now, max_sessions=1)
        )
    finally:
        lite.close()


def test_only_a_plain_sqlite_file_at_this_schema_is_read_lite(tmp_path: Any, settings: Any) -> None:
    assert head_revision() == store_head()
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    assert open_lite(missing, settings=settings) is None
    assert not (tmp_path / "none.db").exists()  # nothing made: the full store creates it
    for url in (
        "postgresql+psycopg://postgres@127.0.0.1/test",
        "sqlite://",
        "sqlite:///:memory:",
        f"sqlite:///{tmp_path / 'x.db'}?mode=ro",
        f"sqlite:///{tmp_path / 'a%20b.db'}",
    ):
        assert sqlite_file(url) is None, url
    assert sqlite_file(f"sqlite:///{tmp_path / 'x.db'}") == (tmp_path / "x.db").resolve()
    # a SQLite file of an older schema is migrated by the full store, not read here
    url = f"sqlite:///{tmp_path / 'old.db'}"
    open_store(url, settings=settings).close()
    assert open_lite(url, settings=settings) is not None
    with sqlite3.connect(tmp_path / "old.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    assert open_lite(url, settings=settings) is None
    (tmp_path / "junk.db").write_bytes(b"not a database at all, not at all")
    assert open_lite(f"sqlite:///{tmp_path / 'junk.db'}", settings=settings) is None


def test_the_lite_store_only_reads(sqlite_url: str, sqlite_store: SqlStore, settings: Any) -> None:
    lite = open_lite(sqlite_url, settings=settings)
    assert lite is not None
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            lite.conn.execute("DELETE FROM reminders")
    finally:
        lite.close()
