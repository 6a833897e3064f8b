"""The tray menu shows the last day's fires with the same counts as ``remindkit stats``."""

from __future__ import annotations

from datetime import datetime, timezone

from remindkit.clock import to_us
from remindkit.store.reports import stats_text
from remindkit.tray.menu import Actions, build_menu
from remindkit.tray.view import build_view

from ..cli.conftest import Home, home  # noqa: F401  (the fixture)
from .test_icon_menu import FakeItem, FakeMenu


def test_recent_fires_starts_with_the_stats(home: Home) -> None:  # noqa: F811
    home.fire_due({"ok": ["true"], "bad": ["false"]})
    cli = home.js("stats")
    store = home.store()
    try:
        now = datetime.now(timezone.utc)
        data = store.reports.fire_stats(since_us=to_us(now) - 86_400_000_000)
        fires = store.reminders.history(limit=5)
    finally:
        store.close()
    assert data["all"] == cli["all"]
    line = stats_text(data["all"])
    assert line.startswith(
        "last 24h: 2 fires · 1 delivered · 1 failed · 0 waiting · 0 skipped · late p50 "
    )
    view = build_view([], fires, now=now, paused_all=False, muted=False, stats=line)
    noop = lambda *_a: None  # noqa: E731
    menu = build_menu(
        FakeMenu, FakeItem, view, Actions(noop, noop, noop, noop, noop, noop, noop, noop)
    )
    recent = menu.find("Recent fires").submenu
    assert recent is not None
    labels = recent.labels()
    assert labels[0] == line and labels[1] is None and len(labels) == 2 + len(fires)
