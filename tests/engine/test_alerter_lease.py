"""The preferred alerter: while the tray's engine holds the ``alerter`` lease,
other engines leave reminders with an alarm or announcement to it; when it
dies, another engine takes alerting over when the lease runs out; an alert
plays at most once per occurrence whichever engines run."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from remindkit import Engine, FakeClock, Reminders
from remindkit.clock import to_us
from remindkit.models import Fire, Session
from remindkit.store import SqlStore


class Recorder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.keys: list[str] = []

    def alert(self, fire: Fire) -> str:
        self.keys.append(fire.key)
        return "done"


@pytest.fixture
def engines(
    sqlite_store: SqlStore, clock: FakeClock
) -> Iterator[tuple[Engine, Engine, Recorder, Recorder, list]]:
    delivered: list[str] = []
    sqlite_store.sessions.put_session(Session(id="s1", adapter="python"), now_us=to_us(clock.now()))
    tray_rec, serve_rec = Recorder("tray"), Recorder("serve")
    tray = Engine(
        sqlite_store,
        clock=clock,
        inline=True,
        alerter=tray_rec,
        engine_id="tray",
        role="tray",
        alert_priority=10,
    )
    serve = Engine(
        sqlite_store, clock=clock, inline=True, alerter=serve_rec, engine_id="serve", role="serve"
    )
    for e in (tray, serve):
        e.adapters.get("python").register(
            "s1", lambda _msg, fires: delivered.extend(f.key for f in fires)
        )
    yield tray, serve, tray_rec, serve_rec, delivered
    for e in (tray, serve):
        e.close()


def run_until(engine: Engine, clock: FakeClock, until_s: float, t0) -> None:
    """Drive one engine by its own wake-ups, as its thread would, up to t0 + until_s."""
    end = t0 + timedelta(seconds=until_s)
    while clock.now() < end:
        wake = engine.tick(clock.now())
        clock.set(min(max(wake, clock.now() + timedelta(microseconds=1)), end))
    engine.tick(clock.now())


def test_the_tray_alerts_while_it_runs_and_serve_takes_over_when_its_lease_ends(
    engines: tuple, sqlite_store: SqlStore, clock: FakeClock
) -> None:
    tray, serve, tray_rec, serve_rec, delivered = engines
    api = Reminders(sqlite_store, clock=clock)
    t0 = clock.now()
    serve.tick(t0)  # serve starts first and takes the free lease...
    assert serve.is_alerter
    tray.tick(t0)  # ...the tray outranks it
    assert tray.is_alerter
    first = api.create("stand up", session="s1", in_="20s", alarm=True)
    plain = api.create("no sound", session="s1", in_="20s")
    clock.advance(11)
    serve.tick(clock.now())  # its next housekeeping: sees the tray's lease
    assert serve.leave_alerts and not serve.is_alerter

    clock.set(t0 + timedelta(seconds=21))
    serve.tick(clock.now())  # claims only the plain reminder
    tray.tick(clock.now())
    assert tray_rec.keys == [f"{first.id}@{_z(first)}"]
    assert serve_rec.keys == []
    assert len(delivered) == 2 and any(k.startswith(plain.id) for k in delivered)

    # The tray dies (no shutdown) right after renewing its lease at t0+21.
    holder = sqlite_store.coordination.lease_holder("alerter", now_us=to_us(clock.now()))
    assert holder is not None and holder[0] == "tray"
    lease_end = sqlite_store.coordination.hold_lease(
        "alerter", holder="probe", priority=-1, until_us=0, now_us=to_us(clock.now())
    )[2]
    second = api.create("after the crash", session="s1", in_="5s", announce="after the crash")
    run_until(serve, clock, (lease_end - to_us(t0)) / 1e6 + 0.5, t0)
    assert serve.is_alerter
    assert serve_rec.keys == [f"{second.id}@{_z(second)}"], (
        "serve alerted within the dead tray's lease"
    )
    assert tray_rec.keys == [f"{first.id}@{_z(first)}"]
    occ = api.history(second.id)[0]
    assert occ.state == "delivered" and occ.alert == "done"
    assert occ.fired_at is not None
    assert to_us(occ.fired_at) <= lease_end + 1_000_000


def test_an_alert_never_plays_twice_with_both_engines_ticking(
    engines: tuple, sqlite_store: SqlStore, clock: FakeClock
) -> None:
    tray, serve, tray_rec, serve_rec, delivered = engines
    api = Reminders(sqlite_store, clock=clock)
    t0 = clock.now()
    rems = [api.create(f"r{i}", session="s1", in_=f"{1 + i % 7}s", alarm=True) for i in range(20)]
    # interleave both engines, with the tray joining late and leaving early
    for step in range(120):
        now = t0 + timedelta(milliseconds=100 * step)
        clock.set(now)
        serve.tick(now)
        if 5 <= step < 60:
            tray.tick(now)
    clock.set(t0 + timedelta(seconds=60))
    run_until(serve, clock, 60, t0)
    keys = tray_rec.keys + serve_rec.keys
    assert len(keys) == len(set(keys)) == len(rems)
    assert sorted(delivered) == sorted(keys)


def _z(rem) -> str:  # the occurrence key's due part
    from remindkit.clock import format_utc

    return format_utc(rem.next_fire_at)
