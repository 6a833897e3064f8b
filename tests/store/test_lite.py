"""The command line's reads through the sqlite3 driver alone (remindkit.store.lite) give
what the store gives, and are only used where they can."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from remindkit.models import DELIVERED, FAILED, WAITING, Session
from remindkit.reminders import Reminders
from remindkit.store import Outcome, SqlStore, open_store
from remindkit.store.db import head_revision as store_head
from remindkit.store.lite import head_revision, open_lite, sqlite_file

from .test_contract import claim


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
    by = {f.reminder_id: f for f in claim(store, clock)}
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


def _tables(path: Any) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(path) as conn:
        return {
            name: conn.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall()
            for name in ("reminders", "sessions", "events", "occurrences")
        }


SPECS = [
    dict(text="one", session="s1", label="deploy", in_="5m"),
    dict(text="two", session="s1", label="deploy", every="1m", repeat="3"),  # replaces one
    dict(text="no session", at="2026-01-05T10:00:00Z"),
    dict(
        text="loud",
        session="s2",
        cron="30 9 * * 1-5",
        tz="Europe/Paris",
        alarm=True,
        announce="stand up",
        urgency="critical",
        misfire="all",
        on_busy="rebase",
    ),
    dict(text="second active in s1", session="s1", in_="1h"),
    dict(text="third active in s1", session="s1", in_="1h"),  # past the limit of 2
    dict(text="bad", session="s2", in_="5x"),
    dict(text="in a deleted session", session="gone", in_="5m"),
    dict(text="a label, no session", label="deploy", in_="2m"),
    dict(text="the same label, no session", label="deploy", in_="3m"),
    dict(text="from a project's namespace", session="s3", project="other", in_="1m"),
]


def _create_all(api: Reminders, clock: Any) -> list[Any]:
    """Each of SPECS through ``api``: what it gave (a Created), or the refusal's code,
    message and details."""
    from remindkit.errors import RemindkitError
    from remindkit.models import ReminderSpec

    out: list[Any] = []
    for fields in SPECS:
        try:
            out.append(api.add(ReminderSpec(**fields)))  # type: ignore[arg-type]
        except RemindkitError as exc:
            out.append((exc.code, exc.message, exc.details))
        clock.advance(1)
    return out


def test_a_create_through_the_driver_alone_is_the_stores(
    tmp_path: Any, clock: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`remind` with no engine creates through LiteStore (opened for writing, no
    SQLAlchemy): the same reminders, sessions, events (ids and all) and refusals, with
    the same codes, as the store's create through the reminders API."""
    from itertools import count

    import remindkit.reminders as api_module
    from remindkit.audit import Surface

    settings = settings.with_limits(per_session=2)
    results, tables = [], []
    for lite_side in (False, True):
        ids = count()
        monkeypatch.setattr(api_module, "new_id", lambda ids=ids: f"rem_{next(ids):012x}")
        path = tmp_path / f"{'lite' if lite_side else 'full'}.db"
        url = f"sqlite:///{path}"
        began = clock.now()
        start = clock.now_us()
        full = open_store(url, settings=settings)
        full.sessions.put_session(Session("gone"), now_us=start)
        full.sessions.delete_session("gone", now_us=start)
        store: Any = full
        if lite_side:
            full.close()
            store = open_lite(url, settings=settings, write=True)
            assert store is not None
        try:
            api = Reminders(store, clock=clock, settings=settings, surface=Surface.CLI)
            results.append(_create_all(api, clock))
        finally:
            store.close()
        tables.append(_tables(path))
        clock.set(began)  # the same times on both sides
    for a, b in zip(results[0], results[1], strict=True):
        assert a == b, (a, b)
    assert tables[0] == tables[1]
    got = results[1]
    assert got[1].replaced == (got[0].reminder.id,)
    assert [g[0] for g in got if isinstance(g, tuple)] == [
        "too_many_reminders",
        "invalid_duration",
        "session_deleted",
    ], got
    assert got[9].replaced == (got[8].reminder.id,)
    assert got[10].reminder.session == "@other/s3"  # a new session in the project's namespace
    kinds = [(e[2], e[5]) for e in tables[1]["events"]]
    assert ("created", got[0].reminder.id) in kinds and ("replaced", got[0].reminder.id) in kinds
    assert all(e[3] == "cli" for e in tables[1]["events"] if e[2] in ("created", "replaced"))


def test_a_lite_store_writes_only_at_this_schema(
    tmp_path: Any, settings: Any, sqlite_url: str
) -> None:
    open_store(sqlite_url, settings=settings).close()
    lite = open_lite(sqlite_url, settings=settings, write=True)
    assert lite is not None
    lite.close()
    with sqlite3.connect(tmp_path / "store.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    assert open_lite(sqlite_url, settings=settings, write=True) is None
    assert open_lite(f"sqlite:///{tmp_path / 'new.db'}", settings=settings, write=True) is None
    assert not (tmp_path / "new.db").exists()
