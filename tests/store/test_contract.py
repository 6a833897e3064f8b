"""The store contract, run over every backend (SQLite file and PostgreSQL)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import text

from remindkit.clock import to_us
from remindkit.engine.plan import plan_fire
from remindkit.errors import Conflict, LimitExceeded, NotFound
from remindkit.models import (
    ACTIVE,
    CANCELLED,
    CLAIMED,
    DELIVERED,
    DONE,
    PAUSED,
    WAITING,
    AdapterName,
    AlertState,
    BusyPolicy,
    FallbackPolicy,
    Message,
    MessageKind,
    MisfirePolicy,
    OccurrenceState,
    ReminderState,
    Role,
    Session,
    SessionState,
    Source,
    Urgency,
    WaitFor,
)
from remindkit.reminders import Reminders
from remindkit.store import Outcome, open_store


@pytest.fixture
def api(store, clock, settings):
    return Reminders(store, clock=clock, settings=settings)


def claim(store, clock, owner="e1", lookahead=0.0, limit=100, lease_s=30):
    now = clock.now()
    fires, _n = store.claims.claim_due(
        now_us=to_us(now),
        horizon_us=to_us(now) + int(lookahead * 1e6),
        owner=owner,
        lease_us=int(lease_s * 1e6),
        limit=limit,
        plan=lambda r: plan_fire(r, now),
    )
    return fires


def test_create_and_read_back(api, store):
    r = api.create(
        "Check the deploy",
        session="s1",
        label="deploy",
        in_="5m",
        alarm=True,
        announce="Deploy check",
    )
    got = store.reminders.get_reminder(r.id)
    assert got == r
    assert got.next_fire_at == api.clock.now() + timedelta(minutes=5)
    assert store.sessions.get_session("s1") is not None


def test_a_create_the_store_refuses_is_a_conflict_and_changes_nothing(api, store, settings):
    """The create's insert goes through the driver (Dialect.run); a row the store
    refuses (here the same id twice) is still SQLAlchemy's IntegrityError, retried,
    then ``conflict``, on both stores, and the transaction leaves nothing behind."""
    r = api.create("once", session="s1", label="x", in_="5m")
    events = len(store.events.events_after(0, limit=1000))
    with pytest.raises(Conflict):
        store.reminders.add_reminder(
            replace(r, label=None), limits=settings.limits, now_us=to_us(api.clock.now())
        )
    assert [x.id for x in api.list(session="s1")] == [r.id]
    assert store.reminders.get_reminder(r.id) == r
    assert len(store.events.events_after(0, limit=1000)) == events


def test_label_replaces_live_reminder(api):
    a = api.create("first", session="s1", label="x", in_="5m")
    b = api.add("second", session="s1", label="x", in_="10m")
    assert b.replaced == (a.id,)
    old = api.get(a.id)
    assert old.state == CANCELLED and old.last_error == f"replaced by {b.reminder.id}"
    assert [r.id for r in api.list(session="s1")] == [b.reminder.id]
    # Another session's label is independent.
    c = api.add("third", session="s2", label="x", in_="10m")
    assert c.replaced == ()


@pytest.mark.parametrize("scope", ["session", "total"])
def test_limits_refuse_and_change_nothing(store, clock, settings, scope):
    limits = (
        {"per_session": 3, "total": None}
        if scope == "session"
        else {"per_session": None, "total": 3}
    )
    api = Reminders(store, clock=clock, settings=settings.with_limits(**limits))
    for i in range(3):
        api.create(f"r{i}", session="s1" if scope == "session" else f"s{i}", in_="5m")
    before = store.reminders.count_reminders()
    with pytest.raises(LimitExceeded) as exc:
        api.create("one too many", session="s1", in_="5m")
    assert exc.value.code == "too_many_reminders"
    assert store.reminders.count_reminders() == before
    # A cancelled one frees a slot.
    api.cancel([api.list()[0].id])
    api.create("fits again", session="s1", in_="5m")


def test_the_limit_counts_active_reminders_and_resume_keeps_to_it(store, clock, settings):
    """The fourth seed's "at most 20 active": a paused reminder does not count; resuming
    one into a full session is refused, and nothing changes."""
    api = Reminders(store, clock=clock, settings=settings.with_limits(per_session=3, total=None))
    made = [api.create(f"r{i}", session="s1", in_="5m") for i in range(3)]
    api.pause([made[0].id])
    api.create("fits: two are active", session="s1", in_="5m")  # refused while paused counted
    with pytest.raises(LimitExceeded) as exc:
        api.resume([made[0].id])
    assert exc.value.code == "too_many_reminders"
    assert api.get(made[0].id).state == "paused"
    api.pause([made[1].id, made[2].id])
    with pytest.raises(LimitExceeded):  # all or nothing: the three would make four
        api.resume([r.id for r in made])
    assert [api.get(r.id).state for r in made] == ["paused"] * 3
    api.resume([made[0].id])
    assert api.get(made[0].id).state == "active"


@pytest.mark.parametrize("scope", ["total", "project"])
def test_resume_keeps_to_every_limit(store, clock, settings, scope):
    """Resuming makes reminders active again: within the limit in all and the project's
    as well as the session's, all or nothing, as a create is (``too_many_reminders``)."""
    limits = {"total": 3} if scope == "total" else {"total": None, "per_project": 3}
    api = Reminders(store, clock=clock, settings=settings.with_limits(per_session=None, **limits))
    made = [api.create(f"r{i}", session=f"s{i}", project="p1", in_="5m") for i in range(3)]
    api.pause([made[0].id])
    api.create("takes the freed place", session="s9", project="p1", in_="5m")
    events = len(store.events.events_after(0, limit=1000))
    with pytest.raises(LimitExceeded) as exc:
        api.resume([made[0].id])
    assert exc.value.code == "too_many_reminders" and exc.value.details["scope"] == scope
    assert api.get(made[0].id).state == PAUSED
    assert len(store.events.events_after(0, limit=1000)) == events  # nothing was written
    with pytest.raises(LimitExceeded):  # the same through update(enabled=True)
        api.update(made[0].id, enabled=True)
    api.pause([made[1].id, made[2].id])
    with pytest.raises(LimitExceeded):  # all or nothing: three paused, one place free
        api.resume([r.id for r in made])
    assert [api.get(r.id).state for r in made] == [PAUSED] * 3
    api.resume([made[1].id])
    assert api.get(made[1].id).state == ACTIVE
    if scope == "project":  # another project has room of its own
        other = api.create("elsewhere", session="s1", project="p2", in_="5m")
        api.pause([other.id])
        assert api.resume([other.id])[0].state == ACTIVE


def test_modify_unknown_id_changes_nothing(api, store):
    a = api.create("a", session="s1", in_="5m")
    with pytest.raises(NotFound):
        api.cancel([a.id, "rem_doesnotexist"])
    assert api.get(a.id).state == ACTIVE


def test_cancel_finished_is_refused(api, store, clock):
    a = api.create("a", session="s1", in_="5m")
    api.cancel([a.id])
    with pytest.raises(Conflict) as exc:
        api.cancel([a.id])
    assert exc.value.code == "not_active"


def test_claim_once_and_advance(api, store, clock):
    one = api.create("one", session="s1", in_="1m")
    rep = api.create("rep", session="s1", every="1m", repeat=2)
    clock.advance(61)
    fires = claim(store, clock)
    assert sorted(f.reminder_id for f in fires) == sorted([one.id, rep.id])
    assert claim(store, clock, owner="e2") == []  # nothing twice
    # Its final occurrence is claimed but has not fired: still active (and cancellable)
    # at its time; it is done once that occurrence has fired.
    pending = api.get(one.id)
    assert pending.state == ACTIVE and pending.next_fire_at == one.next_fire_at
    (f1,) = [f for f in fires if f.reminder_id == one.id]
    store.outcomes.finish(
        [
            Outcome(
                f1.occurrence_id,
                f1.token,
                DELIVERED,
                fired_at_us=clock.now_us(),
                delivered_at_us=clock.now_us(),
            )
        ]
    )
    assert api.get(one.id).state == DONE and api.get(one.id).next_fire_at is None
    r = api.get(rep.id)
    assert r.fired_count == 1 and r.next_fire_at == rep.next_fire_at + timedelta(minutes=1)
    clock.advance(60)
    (f2,) = claim(store, clock)
    assert f2.position == 2
    assert api.get(rep.id).state == ACTIVE
    store.outcomes.mark_fired(
        [(f2.occurrence_id, f2.token, clock.now_us())]
    )  # fired, delivery pending
    assert api.get(rep.id).state == ACTIVE  # still the user's until its delivery has an outcome
    store.outcomes.finish(
        [Outcome(f2.occurrence_id, f2.token, WAITING, wait_for="idle", error="busy")]
    )
    waiting = api.get(rep.id)
    assert waiting.state == ACTIVE and waiting.delivery is not None
    assert waiting.delivery.wait_for == "idle" and waiting.delivery.reason == "busy"
    assert waiting.session is not None  # a session's list reads its waiting fires on its own
    listed = {r.id: r for r in api.list(session=waiting.session)}
    assert listed[rep.id].delivery == waiting.delivery
    (f3,) = store.waiting.claim_waiting(
        now_us=clock.now_us(), owner="e1", lease_us=30_000_000, sessions=None
    )
    store.outcomes.finish(
        [Outcome(f3.occurrence_id, f3.token, DELIVERED, delivered_at_us=clock.now_us())]
    )
    assert api.get(rep.id).state == DONE


def test_outcome_needs_the_token(api, store, clock):
    api.create("one", session="s1", in_="1m")
    clock.advance(61)
    (fire,) = claim(store, clock, lease_s=1)
    # The lease runs out; another engine takes it over with a new token.
    clock.advance(5)
    (taken,) = store.claims.reclaim_expired(
        now_us=clock.now_us(), owner="e2", lease_us=30_000_000, limit=10
    )
    assert taken.occurrence_id == fire.occurrence_id and taken.token != fire.token
    stale = store.outcomes.finish(
        [Outcome(fire.occurrence_id, fire.token, DELIVERED, delivered_at_us=clock.now_us())]
    )
    assert stale == [fire.occurrence_id]
    assert (
        store.outcomes.finish(
            [Outcome(taken.occurrence_id, taken.token, DELIVERED, delivered_at_us=clock.now_us())]
        )
        == []
    )
    (occ,) = store.reminders.history()
    assert occ.state == DELIVERED and occ.attempts == 2


def test_waiting_then_claimed_for_delivery(api, store, clock):
    api.create("one", session="s1", in_="1m")
    clock.advance(61)
    (fire,) = claim(store, clock)
    store.outcomes.finish(
        [Outcome(fire.occurrence_id, fire.token, WAITING, fired_at_us=clock.now_us(), error="busy")]
    )
    assert store.waiting.waiting_sessions() == ["s1"]
    (again,) = store.waiting.claim_waiting(
        now_us=clock.now_us(), owner="e2", lease_us=10**7, sessions=["s1"]
    )
    assert again.occurrence_id == fire.occurrence_id
    assert (
        store.waiting.claim_waiting(
            now_us=clock.now_us(), owner="e3", lease_us=10**7, sessions=None
        )
        == []
    )
    (occ,) = store.reminders.history()
    assert occ.state == CLAIMED and occ.fired_at is not None


def test_paused_all_blocks_claims_and_persists(store_url, settings, clock):
    s1 = open_store(store_url, settings=settings)
    api = Reminders(s1, clock=clock, settings=settings)
    api.create("one", session="s1", in_="1m")
    api.pause_all()
    s1.close()
    s2 = open_store(store_url, settings=settings)
    try:
        clock.advance(120)
        assert s2.coordination.paused_all()
        assert claim(s2, clock) == []
        Reminders(s2, clock=clock, settings=settings).resume_all()
        assert len(claim(s2, clock)) == 1
    finally:
        s2.close()


def test_pause_resume_from_now(api, store, clock):
    """``resume`` starts the count again from now: an interval fires one period after
    the resume, and its later fires keep that grid; a delay runs whole again."""
    r = api.create("rep", session="s1", every="10m")
    once = api.create("tea", session="s1", in_="5m")
    api.pause([r.id, once.id])
    assert api.get(r.id).state == PAUSED
    clock.advance(timedelta(minutes=25))
    now = clock.now()
    resumed, tea = api.resume([r.id, once.id])
    assert resumed.state == ACTIVE
    assert resumed.next_fire_at == now + timedelta(minutes=10)  # not 09:30 of the old grid
    assert resumed.schedule.first_at == resumed.next_fire_at  # the anchor moved with it
    assert store.reminders.get_reminder(r.id).schedule.first_at == now + timedelta(minutes=10)
    assert tea.next_fire_at == now + timedelta(minutes=5)
    clock.advance(timedelta(minutes=10))
    fires = {f.reminder_id: f.due_at for f in claim(store, clock)}
    assert fires == {r.id: now + timedelta(minutes=10), once.id: now + timedelta(minutes=5)}
    assert api.get(r.id).next_fire_at == now + timedelta(minutes=20)


def test_snooze_brings_back_a_fired_one_shot(api, store, clock):
    r = api.create("one", session="s1", in_="1m")
    clock.advance(61)
    (f,) = claim(store, clock)
    store.outcomes.finish(
        [
            Outcome(
                f.occurrence_id,
                f.token,
                DELIVERED,
                fired_at_us=clock.now_us(),
                delivered_at_us=clock.now_us(),
            )
        ]
    )
    assert api.get(r.id).state == DONE
    s = api.snooze(r.id, "10m")
    assert s.state == ACTIVE and s.next_fire_at == clock.now() + timedelta(minutes=10)
    clock.advance(timedelta(minutes=10))
    (f,) = claim(store, clock)
    assert f.reminder_id == r.id
    store.outcomes.finish([], fired=[(f.occurrence_id, f.token, clock.now_us())])
    assert api.get(r.id).state == ACTIVE  # fired, its delivery not yet settled
    store.outcomes.finish(
        [Outcome(f.occurrence_id, f.token, DELIVERED, delivered_at_us=clock.now_us())]
    )
    assert api.get(r.id).state == DONE


def test_delete_session_pauses_its_reminders(api, store, clock):
    r = api.create("one", session="s1", in_="5m")
    store.sessions.delete_session("s1", now_us=clock.now_us())
    got = api.get(r.id)
    assert got.state == PAUSED and "deleted" in got.last_error
    with pytest.raises(Conflict) as exc:
        api.create("two", session="s1", in_="5m")
    assert exc.value.code == "session_deleted"
    with pytest.raises(Conflict):
        api.resume([r.id])


def test_export_import_roundtrip(api, store, store_url, settings, clock, tmp_path):
    api.create("one", session="s1", label="a", in_="5m")
    api.create("two", session="s2", cron="0 9 * * 1-5", tz="Europe/Berlin")
    done = api.create("three", session="s1", in_="1m")
    api.cancel([done.id])
    store.sessions.put_session(
        Session("s1", adapter="command", config={"argv": ["true"]}), now_us=clock.now_us()
    )
    lines = list(api.export())
    other = open_store(f"sqlite:///{tmp_path / 'copy.db'}", settings=settings)
    try:
        api2 = Reminders(other, clock=clock, settings=settings)
        assert api2.import_(lines, trust_sessions=True) == 3
        assert [r.to_dict() for r in api2.list(all=True)] == [
            r.to_dict() for r in api.list(all=True)
        ]
        assert other.sessions.get_session("s1").config == {"argv": ["true"]}
        with pytest.raises(Conflict):
            api2.import_(lines)  # ids exist: refused whole
        assert api2.import_(lines, replace_existing=True) == 3
        assert other.reminders.count_reminders() == 3
    finally:
        other.close()


def test_import_rejects_a_bad_line_and_writes_nothing(api, store):
    good = list(api.export())
    r = api.create("x", session="s1", in_="5m")
    lines = [line for line in api.export()]
    api.cancel([r.id])
    broken = lines[:-1] + ['{"type": "reminder", "id": "rem_x", "text": ""}']
    from remindkit.errors import InvalidInput

    with pytest.raises(InvalidInput) as exc:
        api.import_(broken)
    assert exc.value.code == "invalid_import" and "line" in exc.value.message
    assert store.reminders.count_reminders() == 1
    assert good  # header only


def test_hold_lease_priority(store, clock):
    now = clock.now_us()
    assert (
        store.coordination.hold_lease(
            "alerter", holder="serve", priority=0, until_us=now + 10, now_us=now
        )[0]
        == "serve"
    )
    assert (
        store.coordination.hold_lease(
            "alerter", holder="nb", priority=0, until_us=now + 10, now_us=now
        )[0]
        == "serve"
    )
    assert (
        store.coordination.hold_lease(
            "alerter", holder="tray", priority=10, until_us=now + 10, now_us=now
        )[0]
        == "tray"
    )
    assert (
        store.coordination.hold_lease(
            "alerter", holder="serve", priority=0, until_us=now + 10, now_us=now
        )[0]
        == "tray"
    )
    later = now + 11
    assert (
        store.coordination.hold_lease(
            "alerter", holder="serve", priority=0, until_us=later + 10, now_us=later
        )[0]
        == "serve"
    )


def test_catchup_latest_records_missed(api, store, clock):
    r = api.create("rep", session="s1", every="1m")
    clock.advance(timedelta(minutes=10, seconds=30))
    (f,) = claim(store, clock)
    assert f.missed == 9 and f.due_at == r.next_fire_at + timedelta(minutes=9)
    assert api.get(r.id).next_fire_at == f.due_at + timedelta(minutes=1)


def test_unique_occurrence_key(store, api, clock):
    """A second claim of the same (reminder, due) is impossible even if the reminder row
    is rewound: the key is unique."""
    r = api.create("one", session="s1", in_="1m")
    clock.advance(61)
    (f,) = claim(store, clock)
    store.reminders.modify(
        lambda x: replace(x, state=ACTIVE, next_fire_at=r.next_fire_at),
        now_us=clock.now_us(),
        ids=[r.id],
    )
    assert claim(store, clock, owner="e2") == []
    assert len(store.reminders.history(reminder_id=r.id)) == 1


def test_a_claimed_final_occurrence_can_still_be_cancelled(api, store, clock):
    """Engines claim a little ahead of the due time. In that window the reminder is
    still active and cancelling it stops the claimed occurrence from being delivered."""
    r = api.create("one", session="s1", in_="1m")
    clock.advance(59.5)
    (f,) = claim(store, clock, lookahead=1.0)
    (cancelled,) = api.cancel([r.id])
    assert cancelled.state == CANCELLED
    stale = store.outcomes.finish(
        [Outcome(f.occurrence_id, f.token, DELIVERED, delivered_at_us=clock.now_us())]
    )
    assert stale == [f.occurrence_id]  # its outcome is refused: it was cancelled
    (occ,) = store.reminders.history()
    assert occ.state == "cancelled"


def test_a_session_list_is_every_live_reminder_in_creation_order_with_its_waiting_fire(
    api, store, clock
):
    a = api.create("a", session="s1", in_="1m")
    clock.advance(1)
    b = api.create("b", session="s1", every="2m", label="b")
    clock.advance(1)
    api.create("elsewhere", session="s2", in_="5m")
    c = api.create("c", session="s1", in_="1h")
    api.pause([b.id])
    api.cancel([c.id])
    clock.advance(60)
    (fire,) = claim(store, clock)
    assert fire.reminder_id == a.id
    store.outcomes.finish(
        [Outcome(fire.occurrence_id, fire.token, WAITING, fired_at_us=clock.now_us(), error="busy")]
    )
    live = api.list(session="s1")
    assert [(r.id, r.state) for r in live] == [(a.id, ACTIVE), (b.id, PAUSED)]
    assert live[0].delivery is not None and live[0].delivery.state == WAITING
    assert live[1].delivery is None and live[1].label == "b" and live[1] == api.get(b.id)
    every = api.list(session="s1", all=True)
    assert [r.id for r in every] == [a.id, b.id, c.id] and every[2].state == CANCELLED
    assert api.list(session="nobody") == []


def test_values_read_from_the_store_are_enum_members(api, store, clock):
    """The row mappers hand states and policies on as their enums' members (``is``
    holds, not only ``==``); a value an enum lacks (a newer remindkit wrote it, or a
    hand edit) is read as the string it is, as before."""
    store.sessions.put_session(Session("s1", adapter="python"), now_us=clock.now_us())
    rem = api.create("ring", session="s1", in_="1m", alarm=True, on_busy="rebase")
    got = store.reminders.get_reminder(rem.id)
    assert got.state is ReminderState.ACTIVE and got.urgency is Urgency.NORMAL
    assert got.misfire is MisfirePolicy.LATEST and got.on_busy is BusyPolicy.REBASE
    assert got.source is Source.API
    sess = store.sessions.get_session("s1")
    assert sess.state is SessionState.ACTIVE and sess.adapter is AdapterName.PYTHON
    assert sess.fallback is FallbackPolicy.FRESH
    clock.advance(61)
    (fire,) = claim(store, clock)
    assert fire.alert is AlertState.PENDING and fire.urgency is Urgency.NORMAL
    assert fire.on_busy is BusyPolicy.REBASE
    store.outcomes.finish(
        [Outcome(fire.occurrence_id, fire.token, WAITING, wait_for=WaitFor.IDLE, error="busy")]
    )
    (occ,) = store.reminders.history(reminder_id=rem.id)
    assert occ.state is OccurrenceState.WAITING and occ.wait_for is WaitFor.IDLE
    assert occ.alert is AlertState.PENDING
    delivery = api.get(rem.id).delivery
    assert delivery is not None and delivery.wait_for is WaitFor.IDLE
    store.transcripts.append_messages(
        "s1", [Message("s1", Role.USER, "hello", kind=MessageKind.CHAT)], now_us=clock.now_us()
    )
    (msg,) = store.transcripts.messages("s1")
    assert msg.role is Role.USER and msg.kind is MessageKind.CHAT
    with store.engine.begin() as conn:
        conn.execute(
            text("UPDATE reminders SET urgency = 'blaring' WHERE id = :id"), {"id": rem.id}
        )
    odd = store.reminders.get_reminder(rem.id)
    assert odd.urgency == "blaring" and type(odd.urgency) is str
