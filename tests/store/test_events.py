"""The audit trail, run over every backend: each change and each engine outcome
writes its event in the same transaction; a refused change writes none; readers
tail the trail by id without missing one."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import text

from remindkit.audit import READ_MAX, EventKind, Surface, detail_json
from remindkit.clock import to_us
from remindkit.engine.plan import plan_fire
from remindkit.errors import Conflict, InvalidInput, LimitExceeded, NotFound, StoreError
from remindkit.models import WAITING, Session
from remindkit.reminders import Reminders
from remindkit.store import Outcome, open_store

from .test_contract import claim


@pytest.fixture
def api(store, clock, settings):
    return Reminders(store, clock=clock, settings=settings, surface=Surface.CLI)


def kinds(store, reminder_id=None):
    return [
        (str(e.kind), str(e.surface))
        for e in store.events.recent_events(limit=READ_MAX, reminder_id=reminder_id)
    ]


def test_every_change_is_recorded_with_its_surface(api, store, clock):
    a = api.create("first", session="s1", label="x", in_="5m")
    b = api.add("second", session="s1", label="x", in_="10m", surface="tag").reminder
    api.pause([b.id], surface=Surface.NOTEBOOK)
    api.resume([b.id], surface=Surface.TRAY)
    api.snooze(b.id, "2m")
    api.cancel([b.id], surface=Surface.TOOL)
    assert kinds(store, a.id) == [("created", "cli"), ("replaced", "tag")]
    assert kinds(store, b.id) == [
        ("created", "tag"),
        ("paused", "notebook"),
        ("resumed", "tray"),
        ("snoozed", "cli"),
        ("cancelled", "tool"),
    ]
    events = store.events.events_after(0, limit=READ_MAX)
    assert [e.id for e in events] == sorted({e.id for e in events})  # ids only grow
    created = events[0]
    assert (
        created.session == "s1" and created.reminder_id == a.id and created.detail["label"] == "x"
    )
    assert created.at == clock.now()
    cancelled = events[-1]
    assert cancelled.detail["state"] == ["active", "cancelled"]
    # pausing everything is recorded without a reminder
    api.pause_all()
    (last,) = store.events.events_after(cancelled.id)
    assert (last.kind, last.reminder_id, last.detail) == (EventKind.PAUSED, None, {"all": True})


def test_refused_changes_write_no_event(api, store, clock, settings):
    r = api.create("one", session="s1", in_="5m")
    api.cancel([r.id])
    other = api.create("two", session="s1", in_="5m")
    before = store.events.last_event_id()
    with pytest.raises(Conflict):
        api.cancel([r.id])  # not active
    with pytest.raises(NotFound):
        api.pause([other.id, "rem_missing"])  # the whole call is refused
    with pytest.raises(InvalidInput):
        api.create("", session="s1", in_="5m")
    small = Reminders(store, clock=clock, settings=settings.with_limits(per_session=1))
    with pytest.raises(LimitExceeded):
        small.create("over the limit", session="s1", in_="5m")
    with pytest.raises(InvalidInput):
        api.import_(['{"type": "reminder", "id": "rem_x"}'])
    assert store.events.last_event_id() == before
    assert api.get(other.id).state == "active"


def test_no_change_without_its_event(api, store, clock):
    """When the event cannot be written, the change it records is rolled back."""
    r = api.create("kept", session="s1", in_="5m")
    n = store.reminders.count_reminders()
    with store.write() as conn:
        conn.execute(text("ALTER TABLE events RENAME TO events_away"))
    try:
        with pytest.raises(StoreError):
            api.create("lost", session="s1", in_="5m")
        with pytest.raises(StoreError):
            api.cancel([r.id])
    finally:
        with store.write() as conn:
            conn.execute(text("ALTER TABLE events_away RENAME TO events"))
    assert store.reminders.count_reminders() == n
    assert api.get(r.id).state == "active"
    assert kinds(store) == [("created", "cli")]


def test_engine_outcomes_are_recorded_with_them(api, store, clock):
    one = api.create("deliver me", session="s1", in_="1s")
    two = api.create("wait for me", session="s2", in_="1s")
    clock.advance(2)
    fires = {f.reminder_id: f for f in claim(store, clock)}
    t = to_us(clock.now())
    store.outcomes.mark_fired([(fires[one.id].occurrence_id, fires[one.id].token, t)])
    store.outcomes.mark_fired(
        [(fires[one.id].occurrence_id, fires[one.id].token, t + 5)]
    )  # already marked: no event
    assert (
        store.outcomes.finish(
            [
                Outcome(
                    fires[one.id].occurrence_id,
                    fires[one.id].token,
                    "delivered",
                    fired_at_us=t,
                    delivered_at_us=t + 10,
                    delivered_to="s1",
                ),
                Outcome(
                    fires[two.id].occurrence_id,
                    fires[two.id].token,
                    WAITING,
                    fired_at_us=t,
                    error="s2 is busy",
                ),
            ],
            now_us=t + 10,
        )
        == []
    )
    assert kinds(store, one.id) == [
        ("created", "cli"),
        ("fired", "engine"),
        ("delivered", "engine"),
    ]
    assert kinds(store, two.id) == [("created", "cli"), ("fired", "engine"), ("waiting", "engine")]
    fired = store.events.recent_events(reminder_id=one.id)[1]
    assert fired.detail["late_ms"] == 1000 and fired.session == "s1"
    # taken again and still waiting for the same reason: no second event; a new reason: one
    (again,) = store.waiting.claim_waiting(
        now_us=t, owner="e1", lease_us=30_000_000, sessions=["s2"]
    )
    store.outcomes.finish(
        [Outcome(again.occurrence_id, again.token, WAITING, error="s2 is busy")], now_us=t + 20
    )
    assert kinds(store, two.id)[-1] == ("waiting", "engine") and len(kinds(store, two.id)) == 3
    (again,) = store.waiting.claim_waiting(
        now_us=t, owner="e1", lease_us=30_000_000, sessions=["s2"]
    )
    store.outcomes.finish(
        [Outcome(again.occurrence_id, again.token, "failed", error="\x1b[2J boom")], now_us=t + 30
    )
    last = store.events.recent_events(reminder_id=two.id)[-1]
    assert (last.kind, last.detail["error"]) == (EventKind.FAILED, "\x1b[2J boom")
    # a refused outcome (stale token) writes no event
    before = store.events.last_event_id()
    assert store.outcomes.finish(
        [Outcome(again.occurrence_id, "stale", "delivered", delivered_at_us=t)]
    ) == [again.occurrence_id]
    assert store.events.last_event_id() == before


def test_a_delivered_event_carries_the_start_of_the_reply(api, store, clock):
    made = [api.create(f"r{i}", session="s1", in_="1s") for i in range(2)]
    clock.advance(2)
    fires = {f.reminder_id: f for f in claim(store, clock)}
    t = to_us(clock.now())
    long_reply = "\x01" * 5_000  # every character needs an escape in JSON
    store.outcomes.finish(
        [
            Outcome(
                fires[made[0].id].occurrence_id,
                fires[made[0].id].token,
                "delivered",
                fired_at_us=t,
                delivered_at_us=t,
                delivered_to="s1",
                reply="Done: the build is green.",
            ),
            Outcome(
                fires[made[1].id].occurrence_id,
                fires[made[1].id].token,
                "delivered",
                fired_at_us=t,
                delivered_at_us=t,
                delivered_to="s1",
                reply=long_reply,
            ),
        ],
        now_us=t,
    )
    short = store.events.recent_events(reminder_id=made[0].id)[-1]
    assert (short.kind, short.detail["reply"]) == (EventKind.DELIVERED, "Done: the build is green.")
    cut = store.events.recent_events(reminder_id=made[1].id)[-1]
    assert cut.detail["reply"].endswith("…") and long_reply.startswith(cut.detail["reply"][:-1])
    assert len(detail_json(cut.detail)) <= 1_000


def test_skipped_by_policy_at_claim_time(api, store, clock):
    r = api.create("every minute", session="s1", every="1m", misfire="skip")
    clock.advance(60 * 5 + 30)  # half a period after the latest missed one
    now = clock.now()
    store.claims.claim_due(
        now_us=to_us(now),
        horizon_us=to_us(now),
        owner="e1",
        lease_us=30_000_000,
        limit=100,
        plan=lambda rem: plan_fire(rem, now, grace=timedelta(seconds=1)),
    )
    assert ("skipped", "engine") in kinds(store, r.id)


def test_import_records_each_reminder(api, store, clock):
    a = api.create("exported", session="s1", in_="5m")
    lines = list(api.export())
    api.cancel([a.id])
    assert api.import_(lines, replace_existing=True) == 1
    assert api.get(a.id).state == "active"
    last = store.events.recent_events(reminder_id=a.id)[-1]
    assert (last.kind, last.surface, last.detail["imported"]) == (
        EventKind.CREATED,
        Surface.IMPORT,
        True,
    )


def test_reading_is_bounded(api, store):
    for i in range(5):
        api.create(f"r{i}", session="s1", in_="5m")
    first = store.events.events_after(0, limit=2)
    assert len(first) == 2
    rest = store.events.events_after(first[-1].id, limit=10)
    assert [e.id for e in first + rest] == [e.id for e in store.events.events_after(0, limit=10)]
    for bad in (0, READ_MAX + 1, True, "5"):
        with pytest.raises(InvalidInput):
            store.events.events_after(0, limit=bad)
    with pytest.raises(InvalidInput):
        store.events.events_after(-1)


def test_detail_is_bounded():
    big = detail_json({"error": "x" * 10_000, "more": list(range(1_000))})
    assert big is not None and len(big) <= 1_000
    many = detail_json({f"k{i}": "y" * 150 for i in range(50)})
    assert many is not None and len(many) <= 1_000 and '"truncated": true' in many


def test_a_tailing_reader_misses_no_event(store_url, settings, clock):
    """Four writers commit events while a reader tails by id: it sees every one."""
    stores = [open_store(store_url, settings=settings) for _ in range(5)]
    done = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def write(s):
        try:
            api = Reminders(
                s, clock=clock, settings=settings.with_limits(per_session=None, total=None)
            )
            for i in range(15):
                api.create(f"r{i}", session="s1", in_="5m")
        except BaseException as exc:  # reported below
            errors.append(exc)

    def tail(s):
        last = 0
        while True:
            stop = done.is_set()
            got = s.events.events_after(last, limit=7)
            seen.extend(e.id for e in got)
            last = got[-1].id if got else last
            if stop and not got:
                return

    try:
        reader = threading.Thread(target=tail, args=(stores[4],))
        reader.start()
        writers = [threading.Thread(target=write, args=(s,)) for s in stores[:4]]
        for w in writers:
            w.start()
        for w in writers:
            w.join(120)
        done.set()
        reader.join(60)
        assert not errors
        every = [e.id for e in stores[0].events.events_after(0, limit=READ_MAX)]
        assert len(every) == 60
        assert seen == every
    finally:
        for s in stores:
            s.close()


def test_a_write_that_cannot_get_the_sqlite_lock_is_store_unavailable(tmp_path, settings):
    """BEGIN IMMEDIATE goes through the driver; when another connection holds the
    write lock past the busy timeout, the write is refused as ``store_unavailable``
    and writes nothing, and the next write after the lock is let go goes through."""
    import sqlite3
    from dataclasses import replace

    path = tmp_path / "locked.db"
    store = open_store(f"sqlite:///{path}", settings=replace(settings, busy_timeout_ms=100))
    api = Reminders(store, settings=store.settings)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError) as err:
            api.create("blocked", session="s1", in_="1h")
        assert err.value.code == "store_unavailable"
        assert "locked" in err.value.message
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert api.list(session="s1") == []
    api.create("after", session="s1", in_="1h")
    assert [r.text for r in api.list(session="s1")] == ["after"]
    store.close()


def test_a_write_that_need_not_be_synced_leaves_its_connection_synced_after(tmp_path, settings):
    """Db.write(durable=False) (an engine's heartbeat) commits with synchronous=NORMAL
    on SQLite, visible to other connections at once; the pooled connection goes back
    to the store's FULL, also when the transaction fails."""
    import sqlite3

    path = tmp_path / "sync.db"
    store = open_store(f"sqlite:///{path}", settings=settings)
    db = store.db
    assert db.sync == "FULL"
    seen: list[int] = []
    with db.write(notify=False, durable=False) as conn:
        seen.append(conn.connection.driver_connection.execute("PRAGMA synchronous").fetchone()[0])
        conn.execute(text("INSERT INTO flags (name, value, updated_at) VALUES ('x', '1', 0)"))
    with pytest.raises(RuntimeError), db.write(notify=False, durable=False):
        raise RuntimeError("boom")
    for _ in range(6):  # the pool hands the same connections out again: FULL (2)
        with db.write(notify=False) as conn:
            seen.append(
                conn.connection.driver_connection.execute("PRAGMA synchronous").fetchone()[0]
            )
    assert seen[0] == 1 and set(seen[1:]) == {2}
    other = sqlite3.connect(path)
    assert other.execute("SELECT value FROM flags WHERE name = 'x'").fetchone() == ("1",)
    other.close()
    store.close()


def test_a_tail_brings_a_fired_reminder_and_the_session_project(api, store, clock):
    """Events.tail (the HTTP API's event feed): the events of events_after, each with a
    fired one's reminder as it is now and the project of its session's row."""
    api.create("stretch", session="s1", in_="1s", label="legs", alarm=True, announce="up")
    store.sessions.put_session(Session(id="s1", adapter="python"), now_us=to_us(clock.now()))
    clock.advance(2)
    (fire,) = claim(store, clock)
    t = to_us(clock.now())
    store.outcomes.finish(
        [Outcome(fire.occurrence_id, fire.token, WAITING, fired_at_us=t, error="busy")],
        now_us=t,
    )
    after = store.events.events_after(0, limit=READ_MAX)
    tailed = store.events.tail(0, limit=READ_MAX)
    assert [e for e, _fired, _project in tailed] == after
    by_kind = {str(e.kind): (fired, project) for e, fired, project in tailed}
    assert by_kind["fired"] == (
        {"text": "stretch", "label": "legs", "alarm": True, "announce": "up", "urgency": "normal"},
        "default",
    )
    assert by_kind["created"] == (None, "default")  # only a fired event brings its reminder
    assert store.events.tail(after[-1].id) == []
    assert [e.id for e, _f, _p in store.events.tail(after[0].id, limit=1)] == [after[1].id]
    with pytest.raises(InvalidInput):
        store.events.tail(-1)
