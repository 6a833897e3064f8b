"""The engine runs Python's garbage collector between fires, and its store thread
steps aside for a fire that is about to come due."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Iterator

import pytest

from remindkit.clock import SystemClock, now_us
from remindkit.engine import Engine
from remindkit.engine.collector import MIN_MARGIN, QuietCollector, _collections
from remindkit.engine.core import QUIET_AFTER
from remindkit.models import Fire
from remindkit.settings import Settings
from remindkit.store import SqlStore


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


class Mono:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_it_collects_and_freezes_when_no_fire_is_near() -> None:
    gc.unfreeze()
    mono = Mono()
    qc = QuietCollector(freeze_every_s=5, full_every_s=600, monotonic=mono)
    assert qc.step(None) == "young"
    assert gc.get_freeze_count() > 0  # the survivors are frozen
    assert qc.step(None) is None  # not again before freeze_every_s
    mono.t += 5
    assert qc.step(10.0) is None  # nothing collected since: little is new, nothing to do
    junk = [[i] for i in range(5000)]  # enough to set off a collection of the young
    del junk
    gc.collect(0)
    assert qc.step(10.0) == "young"
    mono.t += 600
    assert qc.step(None) == "full"  # the whole collection comes whatever was collected
    assert qc.runs == {"young": 2, "full": 1}


class Node:
    other: Node | None = None


def test_the_first_step_freezes_without_collecting() -> None:
    """Everything imported is young at the first step: walking it costs the most then
    (100-190 ms of CPU in ``remindkit mcp``), so the first step only freezes, and
    garbage left by then waits for the whole collection."""
    gc.unfreeze()
    gc.collect()
    mono = Mono()
    qc = QuietCollector(freeze_every_s=5, full_every_s=600, monotonic=mono)
    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: only the collector frees it
    left = weakref.ref(a)
    del a, b
    collected = _collections()
    assert qc.step(None) == "young"
    assert _collections() == collected  # no collection ran
    assert left() is not None and gc.get_freeze_count() > 0  # frozen, not freed
    assert qc.took["young"] == 0.1  # the guess stays until a collection is measured
    mono.t += 600
    assert qc.step(None) == "full"
    assert left() is None  # the whole collection frees it


def test_it_waits_while_its_host_holds_it() -> None:
    mono = Mono()
    qc = QuietCollector(monotonic=mono)
    qc.hold(0.2)  # the HTTP API: a fire's event is going out to the streams
    assert qc.step(None) is None
    mono.t += 0.1
    qc.hold(0.05)  # a shorter hold does not end a longer one
    assert qc.step(None) is None
    mono.t += 0.1
    assert qc.step(None) == "young"


def test_it_waits_while_a_fire_is_near() -> None:
    mono = Mono()
    qc = QuietCollector(monotonic=mono)
    assert qc.step(0.001) is None  # a fire due in a millisecond: not now
    assert qc.runs["young"] == 0
    assert qc.step(None) == "young"
    # after a measured collection the margin is what it took, times three, at least MIN_MARGIN
    assert qc.margin("young") == max(MIN_MARGIN, 3 * qc.took["young"])
    mono.t += 600
    assert qc.step(qc.margin("full") / 2) is None
    assert qc.step(qc.margin("full") * 2) == "full"


def test_it_can_be_turned_off_and_leaves_a_host_that_turned_gc_off_alone() -> None:
    gc.unfreeze()
    off = QuietCollector(enabled=False)
    assert off.step(None) is None and gc.get_freeze_count() == 0
    on = QuietCollector()
    gc.disable()
    try:
        assert on.step(None) is None and gc.get_freeze_count() == 0
    finally:
        gc.enable()
    assert Settings.from_env(env={"REMINDKIT_QUIET_GC": "0"}).quiet_gc is False
    assert Settings.from_env(env={}).quiet_gc is True


def _fire(occ_id: int, due_us: int) -> Fire:
    from remindkit.clock import from_us

    return Fire(
        occurrence_id=occ_id,
        reminder_id="rem_x",
        session=None,
        due_at=from_us(due_us),
        text="x",
        token="t",
    )


def test_the_store_thread_sleeps_through_a_fire_due_within_the_quiet_time(
    sqlite_store: SqlStore,
) -> None:
    engine = Engine(sqlite_store, clock=SystemClock(), can_alert=False)
    try:
        t0 = time.perf_counter()
        engine._yield_to_fire()  # nothing claimed: no wait
        nothing = time.perf_counter() - t0
        due = now_us(SystemClock()) + 2000
        engine._push([_fire(1, due)])
        engine._yield_to_fire()
        # it slept at least until just after the fire's due time (a busy machine may
        # make it later, never earlier)
        assert now_us(SystemClock()) >= due + int(QUIET_AFTER * 1e6)
        assert nothing < 0.5
    finally:
        engine.close()


def test_statements_of_the_store_thread_yield_and_no_other_threads(
    sqlite_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = Engine(sqlite_store, clock=SystemClock(), can_alert=False)
    calls: list[str] = []
    monkeypatch.setattr(
        engine, "_yield_to_fire", lambda: calls.append(threading.current_thread().name)
    )
    try:
        with engine._yielding_to_fires():
            sqlite_store.reminders.count_reminders()
            other = threading.Thread(target=sqlite_store.reminders.count_reminders, name="other")
            other.start()
            other.join()
        assert calls and set(calls) == {threading.current_thread().name}
        calls.clear()
        sqlite_store.reminders.count_reminders()  # the listener is gone after the block
        assert calls == []
    finally:
        engine.close()


def test_claims_come_in_small_batches_only_while_a_fire_is_about_to_come_due(
    sqlite_store: SqlStore,
) -> None:
    from remindkit.engine.core import NEAR_FIRE

    engine = Engine(sqlite_store, clock=SystemClock(), can_alert=False)
    try:
        t = now_us(SystemClock())
        assert engine._quiet_for(t)  # nothing claimed
        engine._push([_fire(1, t + int(NEAR_FIRE * 1e6) * 20)])
        assert engine._quiet_for(t)  # the next fire is far off
        engine._push([_fire(2, t + int(NEAR_FIRE * 1e6) // 2)])
        assert not engine._quiet_for(t)  # one is about to come due: small batches
        assert engine._quiet_for(t + int(NEAR_FIRE * 1e6))  # overdue: late anyway, full batches
    finally:
        engine.close()
