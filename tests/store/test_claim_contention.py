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
