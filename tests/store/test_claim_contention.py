"""Engines that claim at the same moment on PostgreSQL each take the next due rows:
one engine's claim in flight (its rows locked) leaves the rest to the others."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.engine import make_url

from remindkit.clock import to_us
from remindkit.engine.plan import plan_fire
from remindkit.reminders import Reminders
from remindkit.store import open_store


@pytest.fixture
def pg(pg_schema_url, clock, settings):
    settings = settings.with_limits(per_session=None, total=None, min_period_s=1)
    store = open_store(pg_schema_url, settings=settings)
    api = Reminders(store, clock=clock, settings=settings)
    yield store, api
    store.close()


def test_a_claim_skips_the_rows_another_claim_holds_and_takes_the_next(pg, clock, pg_schema_url):
    import psycopg

    store, api = pg
    ids = [api.create(f"r{i}", session=f"s{i}", in_=f"{i + 1}s").id for i in range(20)]
    clock.advance(timedelta(seconds=30))
    now = clock.now()
    url = make_url(pg_schema_url).set(drivername="postgresql")
    schema = url.query["options"].split("search_path=")[1]
    raw = url.difference_update_query(["options"]).render_as_string(hide_password=False)
    # Another engine, mid-claim: it holds the five earliest due rows.
    with psycopg.connect(raw) as other:
        other.execute(f'SET search_path TO "{schema}"')
        held = [
            r[0]
            for r in other.execute(
                "SELECT id FROM reminders WHERE state = 'active' "
                "ORDER BY next_fire_at LIMIT 5 FOR UPDATE"
            )
        ]
        assert held == ids[:5]
        fires, n = store.claims.claim_due(
            now_us=to_us(now),
            horizon_us=to_us(now),
            owner="e2",
            lease_us=30_000_000,
            limit=5,
            plan=lambda r: plan_fire(r, now),
        )
        other.rollback()
    # the next five, not none (all engines picking the same first five, one winning)
    assert n == 5
    assert sorted(f.reminder_id for f in fires) == sorted(ids[5:10])


def test_a_takeover_scan_leaves_a_live_owners_claims_to_its_renewal(pg, clock):
    """An engine that looks for lapsed leases while their owner is alive (only slow to
    renew) must not hold those claims while it decides to spare them: the owner's
    renewal skips locked rows, and claims left out round after round grew old enough
    to be taken over from a live engine, which had delivered them (four engines on
    PostgreSQL under load: fires delivered twice)."""
    import threading
    import time

    store, api = pg
    for i in range(200):
        api.create(f"r{i}", session=f"s{i % 10}", in_="1s")
    clock.advance(timedelta(seconds=2))
    now = to_us(clock.now())
    fires, n = store.claims.claim_due(
        now_us=now,
        horizon_us=now,
        owner="e1",
        lease_us=1_000_000,
        limit=500,
        plan=lambda r: plan_fire(r, clock.now()),
    )
    assert n == 200
    later = now + 2_000_000  # e1's leases have run out; e1 is alive (spared for 3 leases)
    stop = threading.Event()
    scans = 0

    def alive_owner(who: str) -> int:
        time.sleep(0.02)  # looking the owner up (its lock file) takes a moment
        return later - 3_000_000

    def scan() -> None:
        nonlocal scans
        while not stop.is_set():
            taken = store.claims.reclaim_expired(
                now_us=later, owner="e2", lease_us=1_000_000, limit=500, expired_before=alive_owner
            )
            assert taken == []
            scans += 1

    scanners = [threading.Thread(target=scan) for _ in range(3)]
    for th in scanners:
        th.start()
    try:
        renewed = []
        deadline = time.monotonic() + 60
        while len(renewed) < 20 and time.monotonic() < deadline:
            renewed.append(store.turns.renew_leases(owner="e1", until_us=later + 1_000_000))
    finally:
        stop.set()
        for th in scanners:
            th.join()
    assert scans > 0 and len(renewed) == 20
    assert renewed == [200] * 20  # every renewal renewed every claim
