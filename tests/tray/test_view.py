"""The tray's view: tooltip, countdowns, entries and fire lines, from the store's
state at a given instant (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from remindkit import FakeClock, Reminders
from remindkit.clock import parse_utc
from remindkit.models import Occurrence, WaitFor
from remindkit.store import SqlStore
from remindkit.tray.view import build_view, countdown, fire_line, reminder_name, tooltip

NOW = parse_utc("2026-01-05T09:00:00Z")


@pytest.fixture
def api(sqlite_store: SqlStore, clock: FakeClock) -> Reminders:
    return Reminders(sqlite_store, clock=clock)


def test_tooltip_names_the_next_reminder_with_its_countdown(api: Reminders) -> None:
    api.create("Check the deploy", label="deploy", in_="299s")
    api.create("Build", in_="2h")
    active = api.list(states=["active"])
    assert (
        tooltip(active, NOW, paused_all=False, muted=False, failed=0)
        == "2 active · next: deploy in 4:59"
    )
    assert (
        tooltip(active, NOW, paused_all=True, muted=True, failed=2)
        == "2 active · paused · muted · 2 failed"
    )
    assert tooltip([], NOW, paused_all=False, muted=False, failed=0) == "no active reminders"


@pytest.mark.parametrize(
    ("delta_s", "text"),
    [(299.4, "in 4:59"), (3600 * 2 + 61, "in 2:01:01"), (0, "due now"), (-5, "due now")],
    ids=["minutes", "hours", "now", "late"],
)
def test_countdown(api: Reminders, delta_s: float, text: str) -> None:
    rem = replace(api.create("x", in_="1h"), next_fire_at=NOW + timedelta(seconds=delta_s))
    assert countdown(rem, NOW) == text


def test_entries_soonest_first_paused_last_and_names_shortened(api: Reminders) -> None:
    late = api.create("Later", label="later", in_="1h")
    soon = api.create("A very long reminder text that goes on and on\nsecond line", in_="1m")
    held = api.create("Held", label="held", in_="30s")
    api.pause([held.id])
    view = build_view(api.list(), [], now=NOW, paused_all=False, muted=False)
    assert [e.id for e in view.entries] == [soon.id, late.id, held.id]
    assert view.entries[0].text == "A very long reminder text t… — in 1:00"
    assert view.entries[2].text == "held — paused" and view.entries[2].paused
    assert view.badge.count == 2 and not view.badge.paused
    assert reminder_name(late) == "later"


def test_fire_lines_and_the_failed_badge(api: Reminders) -> None:
    rem = api.create("Deploy", label="deploy", in_="1m")
    ok = Occurrence(1, rem.id, NOW, "delivered", fired_at=NOW + timedelta(seconds=5))
    bad = Occurrence(
        2, rem.id, NOW, "failed", fired_at=NOW, error="session s1 was deleted", alert="failed"
    )
    assert fire_line(ok, "deploy", "Europe/Berlin") == "10:00:05 deploy — delivered"
    assert (
        fire_line(bad, "deploy", "UTC")
        == "09:00:00 deploy — failed: session s1 was deleted (no sound)"
    )
    view = build_view(api.list(), [ok, bad], now=NOW, paused_all=True, muted=False, tz="UTC")
    assert view.badge.failed and view.badge.paused and view.failed == 1
    assert view.fires[0].endswith("deploy — delivered")


def test_a_waiting_fire_says_why(api: Reminders) -> None:
    rem = api.create("Deploy", label="deploy", in_="1m")

    def waiting(wait_for: WaitFor | None, error: str | None = None) -> str:
        occ = Occurrence(3, rem.id, NOW, "waiting", fired_at=NOW, wait_for=wait_for, error=error)
        return fire_line(occ, "deploy", "UTC")

    assert waiting(WaitFor.IDLE) == "09:00:00 deploy — waiting: its session is busy"
    assert waiting(WaitFor.SESSION, "session s1 has no delivery adapter: …") == (
        "09:00:00 deploy — waiting: no way into its session yet"
    )
    assert waiting(WaitFor.REBASE).endswith("waiting: its session is busy (re-based when idle)")
    assert waiting(WaitFor.RETRY, "model_unreachable: connection refused at 127.0.0.1") == (
        "09:00:00 deploy — waiting: retrying: model_unreachable: connection refused a…"
    )
    assert waiting(None) == "09:00:00 deploy — waiting for the session"


def test_a_view_is_the_same_for_the_same_moment(api: Reminders) -> None:
    api.create("Deploy", in_="5m")
    a = build_view(api.list(), [], now=NOW, paused_all=False, muted=False)
    b = build_view(api.list(), [], now=NOW, paused_all=False, muted=False)
    c = build_view(api.list(), [], now=NOW + timedelta(seconds=1), paused_all=False, muted=False)
    assert a == b and a != c and a.entries[0].id == c.entries[0].id


def test_the_tooltip_says_when_no_engine_runs(api: Reminders) -> None:
    api.create("Check the deploy", label="deploy", in_="299s")
    assert not api.armed()  # nothing runs on this store
    view = build_view(api.list(), [], now=NOW, paused_all=False, muted=False, armed=api.armed())
    assert (
        view.tooltip == "1 active · next: deploy in 4:59 · no engine running"
        and view.header == view.tooltip
    )
    assert (
        "no engine"
        not in build_view(api.list(), [], now=NOW, paused_all=False, muted=False).tooltip
    )
