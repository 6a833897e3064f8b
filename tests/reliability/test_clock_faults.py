"""Clock jumps, suspend and downtime: with a fake clock driving ``tick``, and with
real engine processes whose clock libfaketime moves (forward, back, by days)."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest

from remindkit.alerts import NullAlerter
from remindkit.engine import Engine
from remindkit.models import Session
from remindkit.reminders import Reminders

from .harness import LIBFAKETIME, any_url, cluster_factory, now_us  # noqa: F401
from .ledger import Ledger, Verdict

pytestmark = pytest.mark.reliability


class Keys:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, message, fires):  # type: ignore[no-untyped-def]
        self.seen.extend(f.key for f in fires)


@pytest.fixture
def rig(store, clock, settings):  # type: ignore[no-untyped-def]
    settings = settings.with_limits(per_session=None, total=None)
    api = Reminders(store, clock=clock, settings=settings)
    engine = Engine(store, clock=clock, settings=settings, inline=True, alerter=NullAlerter())
    keys = Keys()
    store.sessions.put_session(Session("s1", adapter="python"), now_us=clock.now_us())
    engine.adapters.get("python").register("s1", keys)
    yield api, engine, keys
    engine.shutdown()


def run(engine, clock, span: timedelta, step: timedelta = timedelta(seconds=5)) -> None:  # type: ignore[no-untyped-def]
    """Tick through ``span`` of (fake) time, at least every ``step``."""
    end = clock.now() + span
    engine.tick(clock.now())
    while clock.now() < end:
        nxt = min(engine.tick(clock.now()), clock.now() + step, end)
        clock.set(max(nxt, clock.now() + timedelta(microseconds=1)))
    engine.tick(clock.now())


def record(name: str, expected: int, keys: list[str], late_ms: float = 0.0) -> None:
    dup = len(keys) - len(set(keys))
    Verdict(
        name, expected, len(set(keys)), max(0, expected - len(set(keys))), dup, late_ms
    ).record()


@pytest.mark.parametrize("jump", [timedelta(hours=1), timedelta(days=3)], ids=["1h", "3d"])
def test_forward_jump_follows_each_policy(rig, clock, jump):  # type: ignore[no-untyped-def]
    api, engine, keys = rig
    one = api.create("one-shot", session="s1", in_="5m")
    latest = api.create("latest", session="s1", every="10m", misfire="latest")
    skip = api.create("skip", session="s1", every="10m", misfire="skip")
    every = api.create("all", session="s1", every="10m", misfire="all", catchup_cap=5)
    engine.tick(clock.now())
    clock.advance(jump + timedelta(minutes=5))  # the wall clock jumps; the engine had been asleep
    engine.tick(clock.now())
    missed = (jump - timedelta(minutes=5)) // timedelta(
        minutes=10
    ) + 1  # due in (now, now + jump + 5m]
    by = {r.id: [o for o in api.history(r.id)] for r in (one, latest, skip, every)}
    assert [o.state for o in by[one.id]] == ["delivered"]
    (lat,) = by[latest.id]
    assert lat.state == "delivered" and lat.missed == missed - 1
    (sk,) = by[skip.id]
    assert sk.state == "skipped" and sk.missed == missed
    assert len(by[every.id]) == 5 and sum(o.missed for o in by[every.id]) == missed - 5
    assert len(keys.seen) == len(set(keys.seen))
    record(
        f"clock +{jump} (fake clock), {api.store.dialect.name}: per policy", 1 + 1 + 5, keys.seen
    )


@pytest.mark.parametrize("back", [timedelta(hours=1), timedelta(days=3)], ids=["1h", "3d"])
def test_backward_jump_never_fires_twice(rig, clock, back):  # type: ignore[no-untyped-def]
    api, engine, keys = rig
    api.create("rep", session="s1", every="1m")
    api.create("one", session="s1", in_="90s")
    run(engine, clock, timedelta(minutes=5))
    fired = list(keys.seen)
    assert len(fired) == 6  # 5 of rep + the one-shot
    clock.set(clock.now() - back)  # the wall clock goes back
    run(engine, clock, back + timedelta(minutes=3), step=timedelta(minutes=1))
    assert len(keys.seen) == len(set(keys.seen)), (
        "an occurrence fired twice after the clock went back"
    )
    assert keys.seen[: len(fired)] == fired
    # Time then catches up with where it was, and the series goes on from there.
    assert len(keys.seen) > len(fired)
    record(
        f"clock -{back} (fake clock), {api.store.dialect.name}: no double fire",
        len(keys.seen),
        keys.seen,
    )


def test_frozen_engine_catches_up_within_its_cap(rig, clock):  # type: ignore[no-untyped-def]
    """Suspended for 10 minutes (no ticks): on the first step after, everything that
    came due is handled, and the engine never plans to sleep longer than its cap."""
    api, engine, keys = rig
    for i in range(5):
        api.create(f"one {i}", session="s1", in_=f"{60 * (i + 1)}s")
    api.create("rep", session="s1", every="2m")
    engine.tick(clock.now())
    clock.advance(timedelta(minutes=10))
    wake = engine.tick(clock.now())
    assert len(set(keys.seen)) == 6
    assert wake - clock.now() <= timedelta(seconds=engine.settings.wait_cap_s)
    (rep,) = [o for o in api.history() if o.missed]
    assert rep.missed == 4
    record(f"suspended 10 min (fake clock), {api.store.dialect.name}", 6, keys.seen)


# -- real processes with libfaketime ------------------------------------------------------

needs_faketime = pytest.mark.skipif(LIBFAKETIME is None, reason="libfaketime is not installed")


def faketime_env(offset_file: Path) -> dict[str, str]:
    assert LIBFAKETIME is not None
    mt = LIBFAKETIME.replace("libfaketime.so.1", "libfaketimeMT.so.1")
    return {
        "LD_PRELOAD": mt if os.path.exists(mt) else LIBFAKETIME,
        "FAKETIME_TIMESTAMP_FILE": str(offset_file),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def recent(c) -> str:  # type: ignore[no-untyped-def]
    """The latest occurrences in the store, for a failure message."""
    return "\n".join(
        f"  {o.key} {o.state} fired={o.fired_at} delivered={o.delivered_at} {o.error or ''}"
        for o in c.store.reminders.history(limit=8)
    )


@needs_faketime
@pytest.mark.processes
def test_real_engine_clock_back_then_forward(any_url, cluster_factory, tmp_path):  # noqa: F811
    offset = tmp_path / "faketime"
    offset.write_text("+0\n")
    c = cluster_factory(any_url)
    engine = c.start(1, env=faketime_env(offset))[0]
    first = now_us() + 1_500_000
    c.load([first], sessions=1, prefix="tick", every_s=1, repeat=None)
    ledger = Ledger(c.ledger_path)
    # Generous: once in a few dozen runs on a loaded machine this engine (under libfaketime,
    # on PostgreSQL) stalls for several seconds between two fires without logging anything;
    # the scenario is about clock jumps, and the diagnosis below says what it was doing.
    deadline = time.monotonic() + 40
    while len(ledger.keys()) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    before = ledger.keys()
    assert len(before) >= 3, f"{dict(before)}\n{recent(c)}\n{engine.diagnose()}"
    offset.write_text("-1h\n")  # the engine's clock goes back an hour
    time.sleep(3)
    during = ledger.keys()
    assert all(n == 1 for n in during.values()), "fired twice after the clock went back"
    assert len(during) - len(before) <= 1  # nothing new fires in the hour it relives
    offset.write_text("+0\n")  # and forward again
    deadline = time.monotonic() + 15
    while len(ledger.keys()) < len(during) + 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    after = ledger.keys()
    assert all(n == 1 for n in after.values())
    assert len(after) > len(during), f"the series did not go on\n{recent(c)}\n{engine.diagnose()}"
    offset.write_text("+3d\n")  # three days ahead: the latest missed one fires, with the count
    deadline = time.monotonic() + 10
    jumped: list = []
    while time.monotonic() < deadline and not any(o.missed > 200_000 for o in jumped):
        time.sleep(0.2)
        jumped = c.store.reminders.history(reminder_id="rem_tick00000000", limit=5)
    assert any(o.missed > 200_000 for o in jumped), [o.missed for o in jumped]
    assert engine.alive()
    keys = [k for t in ledger.turns() for k in t["keys"]]
    record(
        f"real engine clock -1h, +0, +3d (libfaketime), {'sqlite' if 'sqlite' in any_url else 'postgres'}",
        len(set(keys)),
        keys,
    )


@needs_faketime
@pytest.mark.processes
def test_three_days_without_an_engine(any_url, cluster_factory, tmp_path):  # noqa: F811
    """Reminders set, then no engine for three days (its clock starts 3 days ahead):
    one-shots fire once, repeating ones per policy, with what was missed recorded."""
    offset = tmp_path / "faketime"
    offset.write_text("+3d\n")
    c = cluster_factory(any_url)
    start = now_us() + 60_000_000
    ones = c.load([start + i * 1_000_000 for i in range(20)], sessions=4, prefix="one")
    c.load([start], sessions=1, prefix="lat", every_s=3600, misfire="latest")
    c.load([start], sessions=1, prefix="skp", every_s=3600, misfire="skip")
    c.load([start], sessions=1, prefix="all", every_s=3600, misfire="all")
    c.start(1, env=faketime_env(offset))
    ledger = Ledger(c.ledger_path)
    # Under libfaketime (the offset file is read at every clock call) the engine runs
    # a good deal slower than it does otherwise: the bound is generous.
    assert ledger.wait_for(ones, 60)
    # Outcomes are written in batches and the sessions' turns run one after another:
    # wait (bounded) until no occurrence is still in hand, then check what was kept.
    deadline = time.monotonic() + 15
    while True:
        everything = c.store.reminders.history(limit=200)
        if (
            all(o.state not in ("claimed", "waiting") for o in everything)
            or time.monotonic() > deadline
        ):
            break
        time.sleep(0.2)
    hist = {o.reminder_id: o for o in everything}
    lat = [o for o in c.store.reminders.history(reminder_id="rem_lat00000000")]
    skp = [o for o in c.store.reminders.history(reminder_id="rem_skp00000000")]
    alls = [o for o in c.store.reminders.history(reminder_id="rem_all00000000")]
    assert len(lat) == 1 and lat[0].state == "delivered" and lat[0].missed >= 70, lat
    assert len(skp) == 1 and skp[0].state == "skipped" and skp[0].missed >= 71, skp
    assert len(alls) == 10 and sum(o.missed for o in alls) >= 61, alls  # the cap is 10
    states = {k: hist[k.split("@")[0]].state for k in ones}
    assert all(v == "delivered" for v in states.values()), states
    expected = ones | {o.key for o in lat + alls}
    assert ledger.wait_for(expected, 10)
    ledger.verdict(
        f"3 days without an engine, {'sqlite' if 'sqlite' in any_url else 'postgres'}", expected
    )


@pytest.mark.processes
def test_sigstop_suspend_then_catch_up(any_url, cluster_factory):  # noqa: F811
    """An engine frozen while reminders come due handles them within its sleep cap
    (1 s here; 30 s by default) after it is thawed."""
    c = cluster_factory(any_url)
    engine = c.start(1)[0]
    time.sleep(0.5)
    # Loaded first, due in 4 s (the engine claims 1 s ahead), then frozen: a process
    # frozen inside a SQLite write would hold the write lock, so nothing is written
    # while it is.
    start = now_us() + 4_000_000
    expected = c.load([start + i * 100_000 for i in range(30)], sessions=3, prefix="sus")
    engine.freeze()
    assert now_us() < start - 1_200_000, "loading took too long to freeze before the first claim"
    time.sleep(max(0.0, (start - now_us()) / 1e6) + 3.5)  # all came due while it was frozen
    ledger = Ledger(c.ledger_path)
    assert ledger.keys() == {}
    thawed = time.time()
    engine.thaw()
    assert ledger.wait_for(expected, 10)
    first_after = min(t["t"] for t in ledger.turns())
    assert first_after - thawed < 2.0, "not handled within the cap after the thaw"
    ledger.verdict(
        f"frozen 5 s, then thawed, {'sqlite' if 'sqlite' in any_url else 'postgres'}", expected
    )
