"""Which commits are synced to disk: on SQLite ``synchronous`` (FULL, or NORMAL for
one commit), on PostgreSQL ``synchronous_commit`` (on, or off for one transaction),
read inside each write transaction of the store, on both backends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from remindkit.models import DELIVERED, FAILED, WAITING, WaitFor
from remindkit.reminders import Reminders
from remindkit.store import Outcome

from .test_contract import claim


def synced(conn: Any, locks_rows: bool) -> bool:
    if locks_rows:
        return conn.exec_driver_sql("SHOW synchronous_commit").scalar() != "off"
    return int(conn.exec_driver_sql("PRAGMA synchronous").scalar()) >= 2  # FULL


@pytest.fixture
def seen(store: Any) -> Iterator[list[bool]]:
    """Whether each write transaction of the store was synced, in order."""
    db = store.claims.db
    write = db.write
    got: list[bool] = []

    @contextlib.contextmanager
    def watched(**kw: Any) -> Iterator[Any]:
        with write(**kw) as conn:
            got.append(synced(conn, db.dialect.locks_rows))
            yield conn

    db.write = watched
    yield got
    del db.write


def claimed(store: Any, clock: Any, settings: Any, n: int) -> list[Any]:
    api = Reminders(store, clock=clock, settings=settings)
    for i in range(n):
        api.create(f"r{i}", session="s1", in_="1m")
    clock.advance(61)
    fires = claim(store, clock)
    assert len(fires) == n
    return sorted(fires, key=lambda f: f.occurrence_id)


def test_a_repeat_that_would_be_wrong_is_synced_and_nothing_else(store, clock, settings, seen):
    if store.claims.db.dialect.locks_rows is False and store.claims.db.sync == "NORMAL":
        pytest.skip("this store runs every commit unsynced (REMINDKIT_SQLITE_SYNC=NORMAL)")
    a, b, c, d, e = claimed(store, clock, settings, 5)
    seen.clear()
    now = clock.now_us()
    # A fire's time alone: lost to a power cut, the claim fires again, as before the fire.
    store.outcomes.finish([], fired=[(a.occurrence_id, a.token, now)], now_us=now)
    # A fire that waits and that nobody took: the same.
    store.outcomes.finish(
        [Outcome(b.occurrence_id, b.token, WAITING, fired_at_us=now, wait_for=WaitFor.SESSION)],
        now_us=now,
    )
    assert seen == [False, False]
    # A delivery, a hand-over to a turn, a failure: a repeat would be wrong.
    store.outcomes.finish(
        [Outcome(c.occurrence_id, c.token, DELIVERED, fired_at_us=now, delivered_at_us=now)],
        now_us=now,
    )
    store.outcomes.finish(
        [
            Outcome(
                d.occurrence_id,
                d.token,
                WAITING,
                fired_at_us=now,
                wait_for=WaitFor.IDLE,
                handed_at_us=now,
            )
        ],
        now_us=now,
    )
    # with a wait beside it: the transaction is synced for the failure
    store.outcomes.finish(
        [
            Outcome(a.occurrence_id, a.token, WAITING, fired_at_us=now, wait_for=WaitFor.SESSION),
            Outcome(e.occurrence_id, e.token, FAILED, fired_at_us=now, error="no"),
        ],
        now_us=now,
    )
    assert seen == [False, False, True, True, True]
    # a later write on the same pooled connections is synced again
    with store.claims.db.write() as conn:
        assert synced(conn, store.claims.db.dialect.locks_rows)
    states = {o.id: o.state for o in store.reminders.history()}
    assert states == {
        a.occurrence_id: WAITING,
        b.occurrence_id: WAITING,
        c.occurrence_id: DELIVERED,
        d.occurrence_id: WAITING,
        e.occurrence_id: FAILED,
    }


def test_a_claim_is_not_synced_and_the_outcome_after_it_is(store, clock, settings, seen):
    """Lost to a power cut, a claim leaves its reminders due, to be claimed again; the
    delivery after it is synced, and syncs the claim with it."""
    if store.claims.db.dialect.locks_rows is False and store.claims.db.sync == "NORMAL":
        pytest.skip("this store runs every commit unsynced (REMINDKIT_SQLITE_SYNC=NORMAL)")
    (fire,) = claimed(store, clock, settings, 1)
    assert seen[-1] is False  # the claim's transaction
    (occ,) = store.reminders.history()
    assert occ.state == "claimed" and occ.id == fire.occurrence_id
    now = clock.now_us()
    store.outcomes.finish(
        [Outcome(fire.occurrence_id, fire.token, DELIVERED, fired_at_us=now, delivered_at_us=now)],
        now_us=now,
    )
    assert seen[-1] is True
    (occ,) = store.reminders.history()
    assert occ.state == DELIVERED
