"""The status file an engine keeps: what it says (from the store, on SQLite and
PostgreSQL), when it is written (not at once at start, at most every gap after a
change, a heartbeat otherwise), and that readers believe only a fresh one."""

from __future__ import annotations

import json

from remindkit import statusfile
from remindkit.clock import FakeClock, to_us
from remindkit.engine.status import FIRST_DELAY_S, MIN_GAP_S, StatusWriter
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore


def test_summary_counts_per_session(store: SqlStore, settings: Settings) -> None:
    clock = FakeClock("2026-01-05T09:00:00Z")
    api = Reminders(store, clock=clock, settings=settings)
    a = api.create("a", session="s1", in_="5m")
    api.create("b", session="s1", in_="1h")
    c = api.create("c", session="s2", in_="2m")
    api.create("d", in_="3m")
    api.pause([c.id])
    data = store.reports.status_summary(now_us=to_us(clock.now()))
    d = api.get(api.list(session=None)[0].id)  # the one without a session counts in "all" only
    assert data["all"] == {
        "active": 3,
        "paused": 1,
        "next_us": to_us(d.next_fire_at),
        "failed": False,
    }
    assert data["sessions"]["s1"] == {
        "active": 2,
        "paused": 0,
        "next_us": to_us(a.next_fire_at),
        "failed": False,
    }
    assert data["sessions"]["s2"] == {"active": 0, "paused": 1, "next_us": None, "failed": False}
    assert "None" not in json.dumps(data["sessions"]) and None not in data["sessions"]
    api.pause_all()
    assert store.reports.status_summary(now_us=to_us(clock.now()))["paused_all"] is True


def test_writes_are_spaced_and_kept_alive(store: SqlStore, settings: Settings) -> None:
    api = Reminders(store, clock=FakeClock("2026-01-05T09:00:00Z"), settings=settings)
    w = StatusWriter(store, settings.home)
    t0 = 1_000_000_000_000
    assert w.step(t0, changed=True) == t0 + int(FIRST_DELAY_S * 1e6) and not w.path.exists()
    t1 = t0 + int(FIRST_DELAY_S * 1e6)
    w.step(t1, changed=False)
    assert json.loads(w.path.read_text())["written_us"] == t1
    api.create("x", session="s1", in_="5m")
    nxt = w.step(t1 + 1000, changed=True)  # too soon after the last write: later
    assert json.loads(w.path.read_text())["all"]["active"] == 0 and t1 + 1000 < nxt <= t1 + int(
        10 * 1e6
    )
    assert nxt >= t1 + int(MIN_GAP_S * 1e6)
    w.step(nxt, changed=False)
    data = json.loads(w.path.read_text())
    assert data["all"]["active"] == 1 and data["written_us"] == nxt
    beat = w.step(nxt + 1, changed=False)
    assert beat == nxt + int(statusfile.HEARTBEAT_S * 1e6)
    w.step(beat, changed=False)
    assert json.loads(w.path.read_text())["written_us"] == beat
    read = statusfile.read_status(w.path, beat + 1)
    assert read is not None and statusfile.summary_for(read, "s1")["active"] == 1  # type: ignore[index]
    assert statusfile.read_status(w.path, beat + int(statusfile.STALE_S * 1e6) + 1) is None
    w.remove()
    assert not w.path.exists()


def test_a_change_waits_out_a_burst_but_the_heartbeat_does_not(
    sqlite_store: SqlStore, settings: Settings
) -> None:
    from remindkit.engine.status import BUSY_RETRY_S

    api = Reminders(sqlite_store, clock=FakeClock("2026-01-05T09:00:00Z"), settings=settings)
    w = StatusWriter(sqlite_store, settings.home)
    t0 = 1_000_000_000_000
    t1 = t0 + int(FIRST_DELAY_S * 1e6)
    w.step(t0, changed=False)
    w.step(t1, changed=False)
    api.create("x", session="s1", in_="5m")
    later = t1 + int(MIN_GAP_S * 1e6) * 50  # long past the gap
    # a burst of fires is being delivered: the change is not written yet, and asked again soon
    assert w.step(later, changed=True, busy=True) == later + int(BUSY_RETRY_S * 1e6)
    assert json.loads(w.path.read_text())["all"]["active"] == 0
    after = later + int(BUSY_RETRY_S * 1e6)
    w.step(after, changed=False, busy=False)  # the burst is over: written
    assert json.loads(w.path.read_text())["all"]["active"] == 1
    beat = after + int(statusfile.HEARTBEAT_S * 1e6)
    w.step(beat, changed=True, busy=True)  # the heartbeat is written even in a burst
    assert json.loads(w.path.read_text())["written_us"] == beat


def test_a_heartbeat_with_nothing_changed_writes_the_last_summary_again(
    sqlite_store: SqlStore, settings: Settings
) -> None:
    from remindkit.engine.status import RESUMMARY_S

    api = Reminders(sqlite_store, clock=FakeClock("2026-01-05T09:00:00Z"), settings=settings)
    w = StatusWriter(sqlite_store, settings.home)
    w.hints = True  # the engine hears other processes' changes
    t0 = 1_000_000_000_000
    t1 = t0 + int(FIRST_DELAY_S * 1e6)
    w.step(t0, changed=False)
    w.step(t1, changed=False)
    api.create("x", session="s1", in_="5m")  # a change the writer is not told of
    beat = t1 + int(statusfile.HEARTBEAT_S * 1e6)
    w.step(beat, changed=False)
    data = json.loads(w.path.read_text())
    assert data["written_us"] == beat and data["all"]["active"] == 0  # not read again
    late = t1 + int(RESUMMARY_S * 1e6)
    w.step(late, changed=False)  # but read again after RESUMMARY_S, hint or none
    assert json.loads(w.path.read_text())["all"]["active"] == 1
    # without hints every heartbeat reads the store
    api.create("y", session="s1", in_="5m")
    w.hints = False
    again = late + int(statusfile.HEARTBEAT_S * 1e6)
    w.step(again, changed=False)
    assert json.loads(w.path.read_text())["all"]["active"] == 2
