"""The re-base: computed beside ``plan_fire`` from the reminder as read, written by the
store in one transaction that holds only if the reminder did not change meanwhile."""

from __future__ import annotations

from datetime import timedelta

from remindkit.clock import FakeClock, to_us
from remindkit.engine.plan import plan_fire
from remindkit.engine.waiting import rebase_fires
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore


def test_a_reminder_changed_while_it_is_re_based_is_computed_again(
    store: SqlStore, clock: FakeClock, settings: Settings, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    api = Reminders(store, clock=clock, settings=settings)
    rid = api.create("poll", session="s1", every="1m", repeat=5, on_busy="rebase").id
    clock.advance(60)
    now = clock.now()
    t = to_us(now)
    fires, _n = store.claims.claim_due(
        now_us=t,
        horizon_us=t,
        owner="e1",
        lease_us=60_000_000,
        limit=10,
        plan=lambda r: plan_fire(r, now),
    )
    (fire,) = fires
    reads: list[int] = []
    real = store.waiting.reminders_of

    def read_then_edit(ids):  # type: ignore[no-untyped-def]
        got = real(ids)
        reads.append(got[rid].version)
        if len(reads) == 1:  # someone edits the reminder between the read and the write
            api.edit(rid, text="poll the build")
        return got

    monkeypatch.setattr(store.waiting, "reminders_of", read_then_edit)
    clock.advance(20)
    later = clock.now()
    stale, cancelled, moved = rebase_fires(store, [fire], now=later, note="re-based")
    assert len(reads) == 2 and reads[1] > reads[0]  # refused once, computed again
    assert stale == [] and cancelled == []
    rem = api.get(rid)
    assert rem.text == "poll the build"  # the edit is kept
    assert rem.next_fire_at == later + timedelta(minutes=1) and moved == to_us(rem.next_fire_at)
    assert rem.fired_count == 0  # the re-based fire does not count
    assert [o.state for o in store.reminders.history(reminder_id=rid)] == ["skipped"]
